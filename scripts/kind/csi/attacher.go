package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	storagev1ac "k8s.io/client-go/applyconfigurations/storage/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// attacher is what the upstream external-attacher and a storage backend do
// together: VolumeAttachments of the driver are published to their node
// (the record in Store) or refused, and unpublished when deleted.
type attacher struct {
	client kubernetes.Interface
	vas    storagelisters.VolumeAttachmentLister
	pvs    corelisters.PersistentVolumeLister
	queue  workqueue.TypedRateLimitingInterface[string]
	store  Store
	now    func() metav1.Time
}

func runAttacher(ctx context.Context, kubeconfig, root string, resync time.Duration) error {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, resync)
	vaInformer := factory.Storage().V1().VolumeAttachments()
	pvInformer := factory.Core().V1().PersistentVolumes()
	a := newAttacher(client, vaInformer.Lister(), pvInformer.Lister(), Store{Root: root})
	defer a.queue.ShutDown()

	ours := func(obj any) bool {
		va := vaFrom(obj)
		return va != nil && va.Spec.Attacher == driverName
	}
	if _, err := vaInformer.Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: ours,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { a.queue.Add(vaFrom(obj).Name) },
			UpdateFunc: func(_, obj any) { a.queue.Add(vaFrom(obj).Name) },
			// Gone (after its finalizer went, or never ours to hold): the
			// other VolumeAttachments of its volume may attach now.
			DeleteFunc: func(obj any) {
				va := vaFrom(obj)
				a.requeueVolume(a.handleOf(va), va.Name)
			},
		},
	}); err != nil {
		return err
	}
	pvChanged := func(obj any) {
		pv, ok := obj.(*corev1.PersistentVolume)
		if !ok || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName {
			return
		}
		a.requeuePV(pv.Name)
	}
	if _, err := pvInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    pvChanged,
		UpdateFunc: func(_, obj any) { pvChanged(obj) },
	}); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), vaInformer.Informer().HasSynced, pvInformer.Informer().HasSynced) {
		return fmt.Errorf("the caches never synced")
	}
	// Every VolumeAttachment once: the records outlive this process.
	all, err := a.vas.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, va := range all {
		if va.Spec.Attacher == driverName {
			a.queue.Add(va.Name)
		}
	}
	if err := a.pruneRecords(all); err != nil {
		return fmt.Errorf("pruning the records: %w", err)
	}
	log.Printf("attacher of %s started: records in %s, %d VolumeAttachments", driverName, a.store.Root, len(all))
	// One worker: the records are read, changed and written by it alone.
	go func() {
		for a.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	log.Print("stopping")
	return nil
}

// restConfig is the pod's in-cluster configuration, or the kubeconfig file's
// current context when one is named.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (outside a pod, pass --kubeconfig): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

func newAttacher(client kubernetes.Interface, vas storagelisters.VolumeAttachmentLister, pvs corelisters.PersistentVolumeLister, store Store) *attacher {
	return &attacher{
		client: client,
		vas:    vas,
		pvs:    pvs,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "volumeattachments"}),
		store: store,
		now:   metav1.Now,
	}
}

func vaFrom(obj any) *storagev1.VolumeAttachment {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	va, _ := obj.(*storagev1.VolumeAttachment)
	return va
}

func (a *attacher) processNext(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.sync(ctx, name); err != nil {
		log.Printf("va=%s: %v (retrying)", name, err)
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

// sync reconciles the VolumeAttachment name once; an error means "again
// later".
func (a *attacher) sync(ctx context.Context, name string) error {
	va, err := a.vas.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if va.Spec.Attacher != driverName {
		return nil
	}
	pv, err := a.pvOf(va)
	if err != nil {
		return err
	}
	vol, volErr := VolumeOf(driverName, va, pv)
	var record []string
	if volErr == nil {
		if record, err = a.store.Read(vol.Handle); err != nil {
			return fmt.Errorf("reading the record of volume %s: %w", vol.Handle, err)
		}
	}
	act := Decide(driverName, finalizer, va, vol, volErr, record)
	switch act.Verdict {
	case Nothing:
		return nil
	case Retry:
		return errors.New(act.Message)
	case AddFinalizer:
		// The update event brings the VolumeAttachment back.
		return a.setFinalizers(ctx, va, append(append([]string{}, va.Finalizers...), finalizer))
	case Publish:
		if act.WriteRecord {
			if err := a.store.Write(act.Handle, act.Record); err != nil {
				return err
			}
		}
		if act.WriteStatus {
			st := storagev1ac.VolumeAttachmentStatus().
				WithAttached(true).
				WithAttachmentMetadata(AttachmentMetadata(act.Handle))
			if err := a.applyStatus(ctx, va.Name, st); err != nil {
				return err
			}
		}
		published := record
		if act.WriteRecord {
			published = act.Record
		}
		log.Printf("publish volume=%s node=%s va=%s: published to %v", act.Handle, act.Node, va.Name, published)
		return nil
	case Refuse:
		if !act.WriteStatus {
			return nil
		}
		st := storagev1ac.VolumeAttachmentStatus().
			WithAttached(false).
			WithAttachError(storagev1ac.VolumeError().WithTime(a.now()).WithMessage(act.Message))
		if err := a.applyStatus(ctx, va.Name, st); err != nil {
			return err
		}
		log.Printf("refuse volume=%s node=%s va=%s: %s", act.Handle, act.Node, va.Name, act.Message)
		return nil
	case Unpublish:
		if act.WriteRecord {
			if err := a.store.Write(act.Handle, act.Record); err != nil {
				return err
			}
			log.Printf("unpublish volume=%s node=%s va=%s: published to %v", act.Handle, act.Node, va.Name, act.Record)
		} else {
			log.Printf("unpublish volume=%s node=%s va=%s: was not published there", act.Handle, act.Node, va.Name)
		}
		a.requeueVolume(act.Handle, va.Name)
		var keep []string
		for _, f := range va.Finalizers {
			if f != finalizer {
				keep = append(keep, f)
			}
		}
		return a.setFinalizers(ctx, va, keep)
	}
	return fmt.Errorf("unknown verdict %q", act.Verdict)
}

// pruneRecords drops, before the first reconcile, the nodes of every record
// that no VolumeAttachment (all: the cache's, synced) attaches the volume to.
// A node with a VolumeAttachment whose volume is unknown keeps its records.
func (a *attacher) pruneRecords(all []*storagev1.VolumeAttachment) error {
	handles, err := a.store.Handles()
	if err != nil || len(handles) == 0 {
		return err
	}
	holders := map[string]map[string]bool{}
	unknown := map[string]bool{}
	for _, va := range all {
		if va.Spec.Attacher != driverName {
			continue
		}
		h := a.handleOf(va)
		if h == "" {
			unknown[va.Spec.NodeName] = true
			continue
		}
		if holders[h] == nil {
			holders[h] = map[string]bool{}
		}
		holders[h][va.Spec.NodeName] = true
	}
	for _, h := range handles {
		record, err := a.store.Read(h)
		if err != nil {
			return err
		}
		kept, gone := Prune(record, func(n string) bool { return holders[h][n] || unknown[n] })
		if len(gone) == 0 {
			continue
		}
		if err := a.store.Write(h, kept); err != nil {
			return err
		}
		log.Printf("prune volume=%s nodes=%v: no VolumeAttachment attaches it there (published to %v)", h, gone, kept)
	}
	return nil
}

// pvOf is the VolumeAttachment's PersistentVolume from the cache, nil when
// it has none or it is not there.
func (a *attacher) pvOf(va *storagev1.VolumeAttachment) (*corev1.PersistentVolume, error) {
	n := va.Spec.Source.PersistentVolumeName
	if n == nil {
		return nil, nil
	}
	pv, err := a.pvs.Get(*n)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pv, err
}

// handleOf is the volume handle of a VolumeAttachment, "" when unknown.
func (a *attacher) handleOf(va *storagev1.VolumeAttachment) string {
	if va == nil {
		return ""
	}
	pv, err := a.pvOf(va)
	if err != nil {
		return ""
	}
	if pv == nil {
		// Gone with its PersistentVolume: the status still says.
		va = va.DeepCopy()
		if va.DeletionTimestamp == nil {
			va.DeletionTimestamp = &metav1.Time{}
		}
	}
	vol, err := VolumeOf(driverName, va, pv)
	if err != nil {
		return ""
	}
	return vol.Handle
}

// requeueVolume queues every VolumeAttachment of the volume but skip: one
// refused may attach now.
func (a *attacher) requeueVolume(handle, skip string) {
	if handle == "" {
		return
	}
	all, err := a.vas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, va := range all {
		if va.Name != skip && va.Spec.Attacher == driverName && a.handleOf(va) == handle {
			a.queue.Add(va.Name)
		}
	}
}

// requeuePV queues the VolumeAttachments of a PersistentVolume.
func (a *attacher) requeuePV(pvName string) {
	all, err := a.vas.List(labels.Everything())
	if err != nil {
		return
	}
	for _, va := range all {
		if n := va.Spec.Source.PersistentVolumeName; va.Spec.Attacher == driverName && n != nil && *n == pvName {
			a.queue.Add(va.Name)
		}
	}
}

// setFinalizers replaces the VolumeAttachment's finalizers, on the
// condition that it did not change since it was read.
func (a *attacher) setFinalizers(ctx context.Context, va *storagev1.VolumeAttachment, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": va.ResourceVersion,
		"finalizers":      finalizers,
	}})
	if err != nil {
		return err
	}
	_, err = a.client.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting the finalizers to %v: %w", finalizers, err)
	}
	return nil
}

// applyStatus writes the status by server-side apply on the status
// subresource, as the field manager nodefall-csi-attacher: the only way
// this program writes it.
func (a *attacher) applyStatus(ctx context.Context, name string, st *storagev1ac.VolumeAttachmentStatusApplyConfiguration) error {
	_, err := a.client.StorageV1().VolumeAttachments().ApplyStatus(ctx,
		storagev1ac.VolumeAttachment(name).WithStatus(st),
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("applying the status: %w", err)
	}
	return nil
}
