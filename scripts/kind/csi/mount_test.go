package main

import (
	"reflect"
	"testing"
)

const mountinfo = `22 1 0:21 / / rw,relatime shared:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
23 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
101 22 8:1 /nodefall/shared/csi/vol1 /var/lib/kubelet/plugins/kubernetes.io/csi/csi.nodefall.dev/abc/globalmount rw,relatime shared:30 - ext4 /dev/sda1 rw
102 22 8:1 /nodefall/shared/csi/vol1 /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv\040one/mount ro,relatime shared:30 - ext4 /dev/sda1 rw
`

func TestMountPoints(t *testing.T) {
	got, err := MountPoints([]byte(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/",
		"/proc",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.nodefall.dev/abc/globalmount",
		"/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv one/mount",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
	if _, err := MountPoints([]byte("22 1 0:21 / /\n")); err == nil {
		t.Fatal("a short line was accepted")
	}
}

func TestIsMountPoint(t *testing.T) {
	for path, want := range map[string]bool{
		"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.nodefall.dev/abc/globalmount":  true,
		"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.nodefall.dev/abc/globalmount/": true,
		"/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv one/mount":              true,
		"/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pv\\040one/mount":          false,
		"/var/lib/kubelet/plugins/kubernetes.io/csi/csi.nodefall.dev/abc":              false,
		"/var/lib/kubelet": false,
	} {
		got, err := IsMountPoint([]byte(mountinfo), path)
		if err != nil || got != want {
			t.Errorf("%s: got %t, %v", path, got, err)
		}
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`a\040b`:     "a b",
		`tab\011x`:   "tab\tx",
		`back\134sl`: `back\sl`,
		`trail\04`:   `trail\04`,
		`plain`:      "plain",
	} {
		if got := unescapeOctal(in); got != want {
			t.Errorf("%q: got %q", in, got)
		}
	}
}
