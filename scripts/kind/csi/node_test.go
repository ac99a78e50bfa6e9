package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// startTestNode runs the node mode on sockets in a fresh directory (short:
// a socket path has at most 107 bytes).
func startTestNode(t *testing.T) (*NodePlugin, NodeConfig) {
	t.Helper()
	dir, err := os.MkdirTemp("", "kcsi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := NodeConfig{
		NodeID:           "kind-worker",
		Root:             filepath.Join(dir, "shared"),
		CSIAddress:       filepath.Join(dir, "plugins", driverName, "csi.sock"),
		RegistrationPath: filepath.Join(dir, "plugins_registry", driverName+"-reg.sock"),
	}
	// A stale socket from a previous run is replaced.
	if err := os.MkdirAll(filepath.Dir(cfg.CSIAddress), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.CSIAddress, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := StartNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p, cfg
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: got %v, want code %v", what, err, code)
	}
}

var mountCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

func TestNodePluginOverGRPC(t *testing.T) {
	p, cfg := startTestNode(t)
	ctx := testContext(t)
	conn := dial(t, cfg.CSIAddress)
	id := csi.NewIdentityClient(conn)
	node := csi.NewNodeClient(conn)

	info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "csi.nodefall.dev" || info.GetVendorVersion() != "v0.1.0" {
		t.Fatalf("GetPluginInfo: %v, %v", info, err)
	}
	caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
			t.Fatal("CONTROLLER_SERVICE is advertised")
		}
	}
	probe, err := id.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || !probe.GetReady().GetValue() {
		t.Fatalf("Probe: %v, %v", probe, err)
	}

	ni, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "kind-worker" || ni.GetMaxVolumesPerNode() != 0 || ni.GetAccessibleTopology() != nil {
		t.Fatalf("NodeGetInfo: %v, %v", ni, err)
	}
	nc, err := node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil || len(nc.GetCapabilities()) != 1 ||
		nc.GetCapabilities()[0].GetRpc().GetType() != csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME {
		t.Fatalf("NodeGetCapabilities: %v, %v", nc, err)
	}

	// What the kubelet's plugin watcher does with the registration socket.
	reg := registerapi.NewRegistrationClient(dial(t, cfg.RegistrationPath))
	pi, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil || pi.GetType() != "CSIPlugin" || pi.GetName() != "csi.nodefall.dev" ||
		pi.GetEndpoint() != cfg.CSIAddress || strings.Join(pi.GetSupportedVersions(), ",") != "1.0.0" {
		t.Fatalf("GetInfo: %v, %v", pi, err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "no"}); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Dir(cfg.Root)
	staging := filepath.Join(dir, "staging")
	target := filepath.Join(dir, "target")
	block := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{StagingTargetPath: staging, VolumeCapability: mountCap})
	wantCode(t, "stage without a volume id", err, codes.InvalidArgument)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "../x", StagingTargetPath: staging, VolumeCapability: mountCap})
	wantCode(t, "stage of an invalid volume id", err, codes.InvalidArgument)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol1", VolumeCapability: mountCap})
	wantCode(t, "stage without a staging path", err, codes.InvalidArgument)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging})
	wantCode(t, "stage without a capability", err, codes.InvalidArgument)
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, VolumeCapability: block})
	wantCode(t, "stage of a block volume", err, codes.InvalidArgument)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol1", TargetPath: target, VolumeCapability: mountCap})
	wantCode(t, "publish without a staging path", err, codes.InvalidArgument)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: block})
	wantCode(t, "publish of a block volume", err, codes.InvalidArgument)
	_, err = node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap})
	wantCode(t, "publish of a volume not staged", err, codes.FailedPrecondition)
	_, err = node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol1"})
	wantCode(t, "unpublish without a target", err, codes.InvalidArgument)
	_, err = node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{StagingTargetPath: staging})
	wantCode(t, "unstage without a volume id", err, codes.InvalidArgument)
	// Nothing mounted: unpublish and unstage succeed (idempotent).
	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol1", TargetPath: target}); err != nil {
		t.Fatalf("unpublish of nothing: %v", err)
	}
	if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage of nothing: %v", err)
	}

	p.Stop()
	for _, s := range []string{cfg.CSIAddress, cfg.RegistrationPath} {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Errorf("%s is still there after Stop: %v", s, err)
		}
	}
}

// TestNodeMountsForReal stages and publishes a volume with real bind
// mounts: root only (skipped otherwise, and where mounting is not allowed).
func TestNodeMountsForReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	_, cfg := startTestNode(t)
	ctx := testContext(t)
	node := csi.NewNodeClient(dial(t, cfg.CSIAddress))
	dir := filepath.Dir(cfg.Root)
	staging := filepath.Join(dir, "globalmount")
	target := filepath.Join(dir, "pod", "mount")
	roTarget := filepath.Join(dir, "pod-ro", "mount")
	t.Cleanup(func() {
		for _, p := range []string{roTarget, target, staging} {
			for range 4 {
				if unix.Unmount(p, unix.MNT_DETACH) != nil {
					break
				}
			}
		}
	})
	m := Mounter{Mountinfo: "/proc/self/mountinfo"}
	countMounts := func(path string) int {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		points, err := MountPoints(data)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, p := range points {
			if p == path {
				n++
			}
		}
		return n
	}

	stage := &csi.NodeStageVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, VolumeCapability: mountCap}
	if _, err := node.NodeStageVolume(ctx, stage); err != nil {
		if status.Code(err) == codes.Internal && strings.Contains(err.Error(), "operation not permitted") {
			t.Skipf("mounting is not allowed here: %v", err)
		}
		t.Fatalf("stage: %v", err)
	}
	if _, err := node.NodeStageVolume(ctx, stage); err != nil {
		t.Fatalf("stage again: %v", err)
	}
	if n := countMounts(staging); n != 1 {
		t.Fatalf("the staging path is mounted %d times", n)
	}
	if st, err := os.Stat(filepath.Join(cfg.Root, "vol1")); err != nil || st.Mode().Perm() != 0o777 {
		t.Fatalf("the volume directory: %v, %v", st, err)
	}

	publish := &csi.NodePublishVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCap}
	for range 2 {
		if _, err := node.NodePublishVolume(ctx, publish); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	if n := countMounts(target); n != 1 {
		t.Fatalf("the target is mounted %d times", n)
	}
	// Written through the pod's mount, it is in the shared root.
	if err := os.WriteFile(filepath.Join(target, "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Root, "vol1", "data")); err != nil || string(b) != "kept" {
		t.Fatalf("the shared root holds %q, %v", b, err)
	}

	ro := &csi.NodePublishVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging, TargetPath: roTarget, VolumeCapability: mountCap, Readonly: true}
	if _, err := node.NodePublishVolume(ctx, ro); err != nil {
		t.Fatalf("publish read-only: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(roTarget, "data")); err != nil || string(b) != "kept" {
		t.Fatalf("the read-only mount holds %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "other"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("writing to the read-only mount: %v", err)
	}

	for _, tp := range []string{roTarget, target} {
		for range 2 {
			if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol1", TargetPath: tp}); err != nil {
				t.Fatalf("unpublish %s: %v", tp, err)
			}
		}
		if _, err := os.Stat(tp); !os.IsNotExist(err) {
			t.Fatalf("%s is still there: %v", tp, err)
		}
	}
	for range 2 {
		if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "vol1", StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage: %v", err)
		}
	}
	if mounted, err := m.Mounted(staging); err != nil || mounted {
		t.Fatalf("the staging path is still mounted: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Root, "vol1", "data")); err != nil || string(b) != "kept" {
		t.Fatalf("after unstaging, the shared root holds %q, %v", b, err)
	}
}

// TestAStoppedPluginLeavesItsSuccessorsSockets: a node plugin whose
// successor already serves the same paths (a DaemonSet pod made again while
// the old container still runs, after its Node was deleted and registered
// again) stops without removing the successor's sockets, which the kubelet
// keeps using; the successor removes them when it stops.
func TestAStoppedPluginLeavesItsSuccessorsSockets(t *testing.T) {
	old, cfg := startTestNode(t)
	next, err := StartNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Stop)
	old.Stop()
	for _, s := range []string{cfg.CSIAddress, cfg.RegistrationPath} {
		if _, err := os.Stat(s); err != nil {
			t.Fatalf("the successor's %s is gone after its predecessor stopped: %v", s, err)
		}
	}
	info, err := registerapi.NewRegistrationClient(dial(t, cfg.RegistrationPath)).GetInfo(testContext(t), &registerapi.InfoRequest{})
	if err != nil || info.Name != driverName {
		t.Fatalf("the successor's registration socket: %v, %v", info, err)
	}
	plugin, err := csi.NewIdentityClient(dial(t, cfg.CSIAddress)).GetPluginInfo(testContext(t), &csi.GetPluginInfoRequest{})
	if err != nil || plugin.Name != driverName {
		t.Fatalf("the successor's CSI socket: %v, %v", plugin, err)
	}
	next.Stop()
	for _, s := range []string{cfg.CSIAddress, cfg.RegistrationPath} {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the successor stopped: %v", s, err)
		}
	}
}
