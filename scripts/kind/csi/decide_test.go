package main

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testVA(node string, opts ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	pv := "pv1"
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-" + node, Finalizers: []string{finalizer}},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: driverName,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}
	for _, o := range opts {
		o(va)
	}
	return va
}

func noFinalizer(va *storagev1.VolumeAttachment) { va.Finalizers = nil }

func deleting(va *storagev1.VolumeAttachment) { va.DeletionTimestamp = &metav1.Time{} }

func attached(va *storagev1.VolumeAttachment) {
	va.Status.Attached = true
	va.Status.AttachmentMetadata = AttachmentMetadata("vol1")
}

func attachedNoMetadata(va *storagev1.VolumeAttachment) { va.Status.Attached = true }

func refused(msg string) func(*storagev1.VolumeAttachment) {
	return func(va *storagev1.VolumeAttachment) {
		va.Status.AttachError = &storagev1.VolumeError{Message: msg}
	}
}

func testPV(driver, handle string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1"},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes: modes,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle},
			},
		},
	}
}

func TestDecide(t *testing.T) {
	rwo := testPV(driverName, "vol1", corev1.ReadWriteOnce)
	rwop := testPV(driverName, "vol1", corev1.ReadWriteOncePod)
	rwx := testPV(driverName, "vol1", corev1.ReadWriteOnce, corev1.ReadWriteMany)
	rox := testPV(driverName, "vol1", corev1.ReadOnlyMany)
	refusal := RefusalMessage("vol1", []string{"n1"})
	for _, tc := range []struct {
		name    string
		va      *storagev1.VolumeAttachment
		pv      *corev1.PersistentVolume
		record  []string
		want    Action
		wantMsg string // a substring of want.Message
	}{
		{
			name: "the finalizer comes first",
			va:   testVA("n1", noFinalizer), pv: rwo,
			want: Action{Verdict: AddFinalizer, Handle: "vol1", Node: "n1"},
		},
		{
			name: "attach the first node",
			va:   testVA("n1"), pv: rwo,
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n1", Record: []string{"n1"}, WriteRecord: true, WriteStatus: true},
		},
		{
			name: "attach again to the same node: the record holds it, the status is written",
			va:   testVA("n1"), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n1", WriteStatus: true},
		},
		{
			name: "already attached: nothing",
			va:   testVA("n1", attached), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Nothing, Handle: "vol1", Node: "n1"},
		},
		{
			name: "attached but the record lost it: published again",
			va:   testVA("n1", attached), pv: rwo,
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n1", Record: []string{"n1"}, WriteRecord: true},
		},
		{
			name: "attached without the metadata: the status is written",
			va:   testVA("n1", attachedNoMetadata), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n1", WriteStatus: true},
		},
		{
			name: "ReadWriteOnce: a second node is refused",
			va:   testVA("n2"), pv: rwo, record: []string{"n1"},
			want:    Action{Verdict: Refuse, Handle: "vol1", Node: "n2", WriteStatus: true, Message: refusal},
			wantMsg: "volume vol1 is attached to node n1 (single-node writer): detach it first",
		},
		{
			name: "ReadWriteOncePod: a second node is refused",
			va:   testVA("n2"), pv: rwop, record: []string{"n1"},
			want: Action{Verdict: Refuse, Handle: "vol1", Node: "n2", WriteStatus: true, Message: refusal},
		},
		{
			name: "refused already: the status is not written again",
			va:   testVA("n2", refused(refusal)), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Refuse, Handle: "vol1", Node: "n2", Message: refusal},
		},
		{
			name: "refused before, the first node gone: attach",
			va:   testVA("n2", refused(refusal)), pv: rwo,
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n2", Record: []string{"n2"}, WriteRecord: true, WriteStatus: true},
		},
		{
			name: "ReadWriteMany: a second node attaches",
			va:   testVA("n2"), pv: rwx, record: []string{"n1"},
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n2", Record: []string{"n1", "n2"}, WriteRecord: true, WriteStatus: true},
		},
		{
			name: "ReadOnlyMany: a second node attaches",
			va:   testVA("n0"), pv: rox, record: []string{"n1"},
			want: Action{Verdict: Publish, Handle: "vol1", Node: "n0", Record: []string{"n0", "n1"}, WriteRecord: true, WriteStatus: true},
		},
		{
			name: "deleted: unpublish, then the finalizer goes",
			va:   testVA("n1", attached, deleting), pv: rwx, record: []string{"n1", "n2"},
			want: Action{Verdict: Unpublish, Handle: "vol1", Node: "n1", Record: []string{"n2"}, WriteRecord: true},
		},
		{
			name: "deleted, the last node: the record empties",
			va:   testVA("n1", attached, deleting), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Unpublish, Handle: "vol1", Node: "n1", Record: []string{}, WriteRecord: true},
		},
		{
			name: "deleted, refused before: only the finalizer goes",
			va:   testVA("n2", refused(refusal), deleting), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Unpublish, Handle: "vol1", Node: "n2"},
		},
		{
			name: "deleted without our finalizer: nothing",
			va:   testVA("n1", noFinalizer, deleting), pv: rwo, record: []string{"n1"},
			want: Action{Verdict: Nothing, Handle: "vol1", Node: "n1"},
		},
		{
			name: "deleted after its PersistentVolume: the status names the volume",
			va:   testVA("n1", attached, deleting), record: []string{"n1"},
			want: Action{Verdict: Unpublish, Handle: "vol1", Node: "n1", Record: []string{}, WriteRecord: true},
		},
		{
			name: "deleted after its PersistentVolume, attached, the volume unknown: retry",
			va:   testVA("n1", attachedNoMetadata, deleting),
			want: Action{Verdict: Retry, Node: "n1"}, wantMsg: "not found",
		},
		{
			name: "deleted after its PersistentVolume, never attached: only the finalizer goes",
			va:   testVA("n1", deleting),
			want: Action{Verdict: Unpublish, Node: "n1"},
		},
		{
			name: "the PersistentVolume is not known yet: retry",
			va:   testVA("n1"),
			want: Action{Verdict: Retry, Node: "n1"}, wantMsg: "persistent volume not found: pv1",
		},
		{
			name: "the PersistentVolume is another driver's: refuse",
			va:   testVA("n1"), pv: testPV("other.dev", "vol1", corev1.ReadWriteOnce),
			want: Action{Verdict: Refuse, Node: "n1", WriteStatus: true}, wantMsg: "is not a csi.nodefall.dev volume",
		},
		{
			name: "an invalid volume handle: refuse",
			va:   testVA("n1"), pv: testPV(driverName, "../etc", corev1.ReadWriteOnce),
			want: Action{Verdict: Refuse, Node: "n1", WriteStatus: true}, wantMsg: `contains ".."`,
		},
		{
			name: "a VolumeAttachment of another attacher: ignored",
			va:   testVA("n1", noFinalizer, func(va *storagev1.VolumeAttachment) { va.Spec.Attacher = "other.dev" }), pv: rwo,
			want: Action{Verdict: Nothing},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol, volErr := VolumeOf(driverName, tc.va, tc.pv)
			got := Decide(driverName, finalizer, tc.va, vol, volErr, tc.record)
			if !strings.Contains(got.Message, tc.wantMsg) {
				t.Errorf("message %q does not contain %q", got.Message, tc.wantMsg)
			}
			if tc.wantMsg != "" && tc.want.Message == "" {
				got.Message = ""
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestValidHandle(t *testing.T) {
	for _, ok := range []string{"vol1", "a", "my-vol_2.data", strings.Repeat("a", 128)} {
		if err := ValidHandle(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a..b", "../x", ".published", "a/b", "Vol", "a b", "é", strings.Repeat("a", 129)} {
		if ValidHandle(bad) == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestSingleWriter(t *testing.T) {
	for _, tc := range []struct {
		modes []corev1.PersistentVolumeAccessMode
		want  bool
	}{
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, true},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}, true},
		{nil, true},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadWriteMany}, false},
		{[]corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}, false},
	} {
		if got := SingleWriter(tc.modes); got != tc.want {
			t.Errorf("%v: got %t", tc.modes, got)
		}
	}
}

func TestRecordFormat(t *testing.T) {
	if got := ParseRecord([]byte("n2\n\nn1\n n2 \n")); !reflect.DeepEqual(got, []string{"n1", "n2"}) {
		t.Fatalf("parsed %q", got)
	}
	if got := string(FormatRecord([]string{"w2", "w1", "w1"})); got != "w1\nw2\n" {
		t.Fatalf("formatted %q", got)
	}
	if got := FormatRecord(nil); len(got) != 0 {
		t.Fatalf("an empty record formatted as %q", got)
	}
}

func TestPruneKeepsTheNodesWithAVolumeAttachment(t *testing.T) {
	hasVA := func(n string) bool { return n == "w1" || n == "w3" }
	kept, gone := Prune([]string{"w2", "w1", "w4"}, hasVA)
	if !reflect.DeepEqual(kept, []string{"w1"}) || !reflect.DeepEqual(gone, []string{"w2", "w4"}) {
		t.Fatalf("kept %v, gone %v", kept, gone)
	}
	kept, gone = Prune(nil, hasVA)
	if len(kept) != 0 || len(gone) != 0 {
		t.Fatalf("kept %v, gone %v", kept, gone)
	}
}
