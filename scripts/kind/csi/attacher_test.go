package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// TestAttacherSyncsAgainstAFakeAPIServer runs the attacher's reconcile
// (finalizer, publish, refusal, unpublish, requeue) against client-go's
// fake clientset, which keeps managedFields for server-side apply.
func TestAttacherSyncsAgainstAFakeAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pv := testPV(driverName, "vol1", corev1.ReadWriteOnce)
	vaA, vaB := testVA("node-a", noFinalizer), testVA("node-b", noFinalizer)
	client := fake.NewClientset(pv, vaA, vaB)
	vaIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pvIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	store := Store{Root: t.TempDir()}
	a := newAttacher(client, storagelisters.NewVolumeAttachmentLister(vaIndex), corelisters.NewPersistentVolumeLister(pvIndex), store)
	defer a.queue.ShutDown()

	// The informers' caches, as they would be after the events.
	refresh := func() {
		vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var objs, pvObjs []any
		for i := range vas.Items {
			objs = append(objs, &vas.Items[i])
		}
		for i := range pvs.Items {
			pvObjs = append(pvObjs, &pvs.Items[i])
		}
		if err := vaIndex.Replace(objs, ""); err != nil {
			t.Fatal(err)
		}
		if err := pvIndex.Replace(pvObjs, ""); err != nil {
			t.Fatal(err)
		}
	}
	sync := func(name string) {
		t.Helper()
		refresh()
		if err := a.sync(ctx, name); err != nil {
			t.Fatalf("sync %s: %v", name, err)
		}
	}
	get := func(name string) *storagev1.VolumeAttachment {
		t.Helper()
		va, err := client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return va
	}
	record := func() []string {
		t.Helper()
		r, err := store.Read("vol1")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	sync(vaA.Name)
	if got := get(vaA.Name); !HasFinalizer(got, finalizer) || got.Status.Attached {
		t.Fatalf("after the first sync: %+v", got)
	}
	sync(vaA.Name)
	got := get(vaA.Name)
	if !got.Status.Attached || got.Status.AttachmentMetadata["volumeHandle"] != "vol1" || got.Status.AttachError != nil {
		t.Fatalf("not attached: %+v", got.Status)
	}
	if r := record(); len(r) != 1 || r[0] != "node-a" {
		t.Fatalf("record %v", r)
	}
	// The fake tracker leaves managedFields' subresource empty (an API
	// server says "status" for ApplyStatus): the manager, the operation
	// and the fields are what it can show.
	statusByUs := false
	for _, mf := range got.ManagedFields {
		if mf.Manager == fieldManager && (mf.Subresource == "status" || mf.Subresource == "") &&
			mf.Operation == metav1.ManagedFieldsOperationApply && mf.FieldsV1 != nil &&
			strings.Contains(string(mf.FieldsV1.Raw), `"f:status":{"f:attached"`) {
			statusByUs = true
		}
	}
	if !statusByUs {
		t.Fatalf("no apply of the status by %s in %+v", fieldManager, got.ManagedFields)
	}
	rv := got.ResourceVersion
	sync(vaA.Name)
	if get(vaA.Name).ResourceVersion != rv {
		t.Fatal("an attached VolumeAttachment was written again")
	}

	sync(vaB.Name)
	sync(vaB.Name)
	got = get(vaB.Name)
	if got.Status.Attached || got.Status.AttachError == nil ||
		got.Status.AttachError.Message != "volume vol1 is attached to node node-a (single-node writer): detach it first" {
		t.Fatalf("node-b was not refused: %+v", got.Status)
	}
	rv = got.ResourceVersion
	sync(vaB.Name)
	if get(vaB.Name).ResourceVersion != rv {
		t.Fatal("a refused VolumeAttachment was written again")
	}

	// node-a's VolumeAttachment deleted (the finalizer holds it): unpublished,
	// the finalizer removed, node-b's queued again, then attached.
	del := get(vaA.Name)
	now := metav1.Now()
	del.DeletionTimestamp = &now
	if _, err := client.StorageV1().VolumeAttachments().Update(ctx, del, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for a.queue.Len() > 0 { // what the events queued so far
		k, _ := a.queue.Get()
		a.queue.Done(k)
	}
	sync(vaA.Name)
	if r := record(); len(r) != 0 {
		t.Fatalf("record %v after unpublishing", r)
	}
	if _, err := os.Stat(filepath.Join(store.Root, ".published", "vol1")); !os.IsNotExist(err) {
		t.Fatalf("the empty record's file: %v", err)
	}
	if HasFinalizer(get(vaA.Name), finalizer) {
		t.Fatal("the finalizer is still there")
	}
	if a.queue.Len() != 1 {
		t.Fatalf("%d queued, want node-b's", a.queue.Len())
	}
	if k, _ := a.queue.Get(); k != vaB.Name {
		t.Fatalf("queued %s", k)
	} else {
		a.queue.Done(k)
	}
	sync(vaB.Name)
	got = get(vaB.Name)
	if !got.Status.Attached || got.Status.AttachError != nil {
		t.Fatalf("node-b not attached after node-a detached: %+v", got.Status)
	}
	if r := record(); len(r) != 1 || r[0] != "node-b" {
		t.Fatalf("record %v", r)
	}
}

func TestAttacherPrunesRecordsNoVolumeAttachmentHolds(t *testing.T) {
	store := Store{Root: t.TempDir()}
	for h, nodes := range map[string][]string{"vol1": {"node-a", "old-node"}, "vol2": {"old-node"}} {
		if err := store.Write(h, nodes); err != nil {
			t.Fatal(err)
		}
	}
	vaIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	pvIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	va := testVA("node-a", attached)
	if err := vaIndex.Add(va); err != nil {
		t.Fatal(err)
	}
	if err := pvIndex.Add(testPV(driverName, "vol1", corev1.ReadWriteOnce)); err != nil {
		t.Fatal(err)
	}
	a := newAttacher(fake.NewClientset(), storagelisters.NewVolumeAttachmentLister(vaIndex), corelisters.NewPersistentVolumeLister(pvIndex), store)
	defer a.queue.ShutDown()
	if err := a.pruneRecords([]*storagev1.VolumeAttachment{va}); err != nil {
		t.Fatal(err)
	}
	if r, err := store.Read("vol1"); err != nil || len(r) != 1 || r[0] != "node-a" {
		t.Fatalf("vol1: %v, %v", r, err)
	}
	if h, err := store.Handles(); err != nil || len(h) != 1 {
		t.Fatalf("records left: %v, %v", h, err)
	}
}

func TestRestConfigReadsAKubeconfigOrSaysWhatIsMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: t0ken}
contexts:
- name: sim
  context: {cluster: sim, user: admin}
current-context: sim
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "t0ken" {
		t.Fatalf("host %q, token %q", cfg.Host, cfg.BearerToken)
	}
	if _, err := restConfig(filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "kubeconfig ") {
		t.Fatalf("a missing kubeconfig: %v", err)
	}
	// Outside a pod, without a kubeconfig: the error says what to pass.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := restConfig(""); err == nil || !strings.Contains(err.Error(), "pass --kubeconfig") {
		t.Fatalf("no configuration: %v", err)
	}
}
