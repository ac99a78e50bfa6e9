package main

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Verdict is what the attacher does about one VolumeAttachment.
type Verdict string

const (
	// Nothing: not ours, or already as it should be.
	Nothing Verdict = "nothing"
	// AddFinalizer: the first step for a VolumeAttachment to attach, before
	// anything is published (as the upstream external-attacher does).
	AddFinalizer Verdict = "add-finalizer"
	// Publish ("ControllerPublish"): write Record (when WriteRecord), then
	// the status attached=true (when WriteStatus).
	Publish Verdict = "publish"
	// Refuse: the volume is published to another node and only one node
	// may write it; the status says attached=false with Message as the
	// attach error (when WriteStatus).
	Refuse Verdict = "refuse"
	// Unpublish ("ControllerUnpublish"): write Record (when WriteRecord),
	// then remove the finalizer.
	Unpublish Verdict = "unpublish"
	// Retry: nothing can be decided yet (Message says why); try again later.
	Retry Verdict = "retry"
)

// Action is the decision about one VolumeAttachment.
type Action struct {
	Verdict Verdict
	Handle  string // the volume's handle (when known)
	Node    string // the VolumeAttachment's node
	// Record is the set of nodes the volume is to be published to, for
	// Publish and Unpublish when WriteRecord (empty: published nowhere).
	Record      []string
	WriteRecord bool
	// WriteStatus: the VolumeAttachment's status is not yet what the
	// verdict writes (Publish, Refuse).
	WriteStatus bool
	Message     string // Refuse: the attach error; Retry: why
}

// Volume is what the attacher needs of a VolumeAttachment's volume.
type Volume struct {
	Handle string
	// SingleWriter: one node at a time (ReadWriteOnce, ReadWriteOncePod),
	// as opposed to ReadWriteMany or ReadOnlyMany.
	SingleWriter bool
}

// ErrPVNotFound: the PersistentVolume a VolumeAttachment names is not (yet)
// in the attacher's cache. Anything else VolumeOf returns is final.
var ErrPVNotFound = errors.New("persistent volume not found")

// metadataHandle is the key of the attachment metadata (the CSI publish
// context) that holds the volume handle: it lets the attacher unpublish a
// volume whose PersistentVolume was deleted before its VolumeAttachment.
const metadataHandle = "volumeHandle"

// VolumeOf finds the volume of a VolumeAttachment of driver: from its
// PersistentVolume (nil when not in the cache) or, for a VolumeAttachment
// being deleted whose PersistentVolume is gone, from its status.
func VolumeOf(driver string, va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume) (Volume, error) {
	pvName := va.Spec.Source.PersistentVolumeName
	if pvName == nil || *pvName == "" {
		return Volume{}, fmt.Errorf("only PersistentVolume sources are supported")
	}
	if pv == nil {
		if h := va.Status.AttachmentMetadata[metadataHandle]; va.DeletionTimestamp != nil && ValidHandle(h) == nil {
			return Volume{Handle: h, SingleWriter: true}, nil
		}
		return Volume{}, fmt.Errorf("%w: %s", ErrPVNotFound, *pvName)
	}
	if pv.Name != *pvName {
		return Volume{}, fmt.Errorf("%w: %s (got %s)", ErrPVNotFound, *pvName, pv.Name)
	}
	src := pv.Spec.CSI
	if src == nil || src.Driver != driver {
		return Volume{}, fmt.Errorf("persistent volume %s is not a %s volume", pv.Name, driver)
	}
	if err := ValidHandle(src.VolumeHandle); err != nil {
		return Volume{}, fmt.Errorf("persistent volume %s: %w", pv.Name, err)
	}
	return Volume{Handle: src.VolumeHandle, SingleWriter: SingleWriter(pv.Spec.AccessModes)}, nil
}

// SingleWriter says whether a volume with these access modes may be
// published to one node at a time only: anything but ReadWriteMany and
// ReadOnlyMany.
func SingleWriter(modes []corev1.PersistentVolumeAccessMode) bool {
	return !slices.Contains(modes, corev1.ReadWriteMany) && !slices.Contains(modes, corev1.ReadOnlyMany)
}

// ValidHandle checks a volume handle, which names a directory under the
// shared root and a record file: [a-z0-9._-], 1 to 128 characters, no "..",
// not starting with a dot (".", and the records' own ".published").
func ValidHandle(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("empty volume handle")
	case len(h) > 128:
		return fmt.Errorf("volume handle %q is longer than 128 characters", h)
	case strings.Contains(h, ".."):
		return fmt.Errorf("volume handle %q contains \"..\"", h)
	case h[0] == '.':
		return fmt.Errorf("volume handle %q starts with a dot", h)
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("volume handle %q has a character outside [a-z0-9._-]", h)
		}
	}
	return nil
}

// HasFinalizer says whether the VolumeAttachment holds finalizer.
func HasFinalizer(va *storagev1.VolumeAttachment, finalizer string) bool {
	return slices.Contains(va.Finalizers, finalizer)
}

// RefusalMessage is the attach error of a single-writer volume published
// to another node.
func RefusalMessage(handle string, holders []string) string {
	return fmt.Sprintf("volume %s is attached to node %s (single-node writer): detach it first", handle, strings.Join(holders, ","))
}

// Decide is the attacher's decision about the VolumeAttachment va of
// driver, whose finalizer is finalizer: vol and volErr are what VolumeOf
// returned, record the nodes the volume is published to now.
func Decide(driver, finalizer string, va *storagev1.VolumeAttachment, vol Volume, volErr error, record []string) Action {
	if va.Spec.Attacher != driver {
		return Action{Verdict: Nothing}
	}
	node := va.Spec.NodeName
	act := Action{Node: node, Handle: vol.Handle}
	if volErr != nil {
		act.Handle = ""
	}

	if va.DeletionTimestamp != nil {
		if !HasFinalizer(va, finalizer) {
			act.Verdict = Nothing
			return act
		}
		if volErr != nil {
			if va.Status.Attached {
				// Published, and nowhere to say from which volume.
				act.Verdict, act.Message = Retry, fmt.Sprintf("cannot unpublish: %v", volErr)
				return act
			}
			// Never attached: nothing published to take back.
			act.Verdict = Unpublish
			return act
		}
		act.Verdict = Unpublish
		if slices.Contains(record, node) {
			act.Record, act.WriteRecord = without(record, node), true
		}
		return act
	}

	if !HasFinalizer(va, finalizer) {
		act.Verdict = AddFinalizer
		return act
	}
	if volErr != nil {
		if errors.Is(volErr, ErrPVNotFound) {
			act.Verdict, act.Message = Retry, volErr.Error()
			return act
		}
		act.Verdict, act.Message = Refuse, volErr.Error()
		act.WriteStatus = !refusedWith(va, act.Message)
		return act
	}

	if vol.SingleWriter {
		if others := without(record, node); len(others) > 0 {
			act.Verdict, act.Message = Refuse, RefusalMessage(vol.Handle, others)
			act.WriteStatus = !refusedWith(va, act.Message)
			return act
		}
	}
	act.Verdict = Publish
	if !slices.Contains(record, node) {
		act.Record, act.WriteRecord = normalize(append(slices.Clone(record), node)), true
	}
	act.WriteStatus = !attachedWith(va, vol.Handle)
	if !act.WriteRecord && !act.WriteStatus {
		act.Verdict = Nothing
	}
	return act
}

// AttachmentMetadata is the status.attachmentMetadata of an attached
// volume (the CSI publish context).
func AttachmentMetadata(handle string) map[string]string {
	return map[string]string{metadataHandle: handle}
}

func attachedWith(va *storagev1.VolumeAttachment, handle string) bool {
	s := va.Status
	return s.Attached && s.AttachError == nil && len(s.AttachmentMetadata) == 1 && s.AttachmentMetadata[metadataHandle] == handle
}

func refusedWith(va *storagev1.VolumeAttachment, message string) bool {
	s := va.Status
	return !s.Attached && s.AttachError != nil && s.AttachError.Message == message
}

func without(nodes []string, node string) []string {
	out := []string{}
	for _, n := range nodes {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

// normalize sorts the node names and drops empty and repeated ones.
func normalize(nodes []string) []string {
	out := []string{}
	for _, n := range nodes {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Prune splits a volume's record, when the attacher starts, into the nodes
// a VolumeAttachment still attaches it to (hasVA) and the others: a record
// the attacher did not unpublish (its cluster gone with the volume attached,
// a finalizer removed by hand) would refuse the volume forever.
func Prune(record []string, hasVA func(node string) bool) (kept, gone []string) {
	kept, gone = []string{}, []string{}
	for _, n := range normalize(record) {
		if hasVA(n) {
			kept = append(kept, n)
		} else {
			gone = append(gone, n)
		}
	}
	return kept, gone
}

// ParseRecord reads a record file: node names, one a line.
func ParseRecord(data []byte) []string {
	return normalize(strings.Split(string(data), "\n"))
}

// FormatRecord writes a record file: node names, sorted, one a line.
func FormatRecord(nodes []string) []byte {
	nodes = normalize(nodes)
	if len(nodes) == 0 {
		return nil
	}
	return []byte(strings.Join(nodes, "\n") + "\n")
}
