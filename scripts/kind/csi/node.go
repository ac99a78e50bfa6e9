package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// NodeConfig is the node mode's configuration.
type NodeConfig struct {
	NodeID           string // the Node's name
	Root             string // the shared root the volumes live in
	CSIAddress       string // the CSI socket, the same path on the host
	RegistrationPath string // the kubelet's plugin registration socket
	Mountinfo        string // /proc/self/mountinfo unless set
}

// NodePlugin is the node mode running: the CSI server (identity and node
// services) and the registration server the kubelet's plugin watcher finds.
type NodePlugin struct {
	cfg  NodeConfig
	csi  *grpc.Server
	reg  *grpc.Server
	errs chan error
	// The sockets as made here: Stop removes a path only while it is still
	// this plugin's socket. A plugin that follows this one on the node (a
	// DaemonSet's pod made again while this one's container still runs,
	// after its Node was deleted and registered again) has made its own
	// at the same path by then, and removing that would unregister the
	// driver from the kubelet for good.
	csiSock, regSock os.FileInfo
}

func runNode(ctx context.Context, cfg NodeConfig) error {
	p, err := StartNode(cfg)
	if err != nil {
		return err
	}
	defer p.Stop()
	select {
	case <-ctx.Done():
		log.Print("stopping")
		return nil
	case err := <-p.errs:
		return err
	}
}

// StartNode serves the CSI socket, then (the plugin answering by then) the
// registration socket.
func StartNode(cfg NodeConfig) (*NodePlugin, error) {
	if cfg.Mountinfo == "" {
		cfg.Mountinfo = "/proc/self/mountinfo"
	}
	p := &NodePlugin{cfg: cfg, errs: make(chan error, 2)}
	csiL, csiSock, err := listen(cfg.CSIAddress)
	if err != nil {
		return nil, err
	}
	p.csiSock = csiSock
	p.csi = grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(p.csi, &identityService{})
	csi.RegisterNodeServer(p.csi, &nodeService{cfg: cfg, m: Mounter{Mountinfo: cfg.Mountinfo}})
	go p.serve(p.csi, csiL, "CSI")

	regL, regSock, err := listen(cfg.RegistrationPath)
	if err != nil {
		p.csi.Stop()
		removeOwn(cfg.CSIAddress, csiSock)
		return nil, err
	}
	p.regSock = regSock
	p.reg = grpc.NewServer()
	registerapi.RegisterRegistrationServer(p.reg, &registrationService{endpoint: cfg.CSIAddress})
	go p.serve(p.reg, regL, "registration")
	log.Printf("node plugin of %s on %s: CSI on %s, registration on %s, volumes in %s",
		driverName, cfg.NodeID, cfg.CSIAddress, cfg.RegistrationPath, cfg.Root)
	return p, nil
}

func (p *NodePlugin) serve(s *grpc.Server, l net.Listener, what string) {
	if err := s.Serve(l); err != nil {
		p.errs <- fmt.Errorf("serving %s on %s: %w", what, l.Addr(), err)
	}
}

// Stop stops the registration server first (the kubelet sees the plugin
// go), then the CSI server, and removes both sockets, each only while it is
// still the one this plugin made.
func (p *NodePlugin) Stop() {
	p.reg.Stop()
	removeOwn(p.cfg.RegistrationPath, p.regSock)
	done := make(chan struct{})
	go func() {
		p.csi.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.csi.Stop()
	}
	removeOwn(p.cfg.CSIAddress, p.csiSock)
}

// listen makes the socket's directory, removes a stale socket (or a
// predecessor's: this plugin takes over), and returns the listener and the
// socket as made. The listener does not unlink the path when it closes
// (Go's default unlinks whatever is there by then): removeOwn does.
func listen(path string) (net.Listener, os.FileInfo, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	made, err := os.Stat(path)
	if err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("reading the socket %s just made: %w", path, err)
	}
	return l, made, nil
}

// removeOwn removes path only while it is still the socket made (another
// plugin's socket at the same path stays).
func removeOwn(path string, made os.FileInfo) {
	now, err := os.Stat(path)
	if err != nil || !os.SameFile(now, made) {
		if err == nil {
			log.Printf("leaving %s: another plugin's socket now", path)
		}
		return
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Printf("removing %s: %v", path, err)
	}
}

// logCalls logs the node service's volume calls and every failed call.
func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	volumeCall := strings.HasSuffix(method, "Volume")
	switch {
	case err != nil:
		log.Printf("%s %s: %v", method, volumeOf(req), err)
	case volumeCall:
		log.Printf("%s %s: ok", method, volumeOf(req))
	}
	return resp, err
}

func volumeOf(req any) string {
	switch r := req.(type) {
	case *csi.NodeStageVolumeRequest:
		return fmt.Sprintf("volume=%s staging=%s", r.GetVolumeId(), r.GetStagingTargetPath())
	case *csi.NodeUnstageVolumeRequest:
		return fmt.Sprintf("volume=%s staging=%s", r.GetVolumeId(), r.GetStagingTargetPath())
	case *csi.NodePublishVolumeRequest:
		return fmt.Sprintf("volume=%s target=%s readonly=%t", r.GetVolumeId(), r.GetTargetPath(), r.GetReadonly())
	case *csi.NodeUnpublishVolumeRequest:
		return fmt.Sprintf("volume=%s target=%s", r.GetVolumeId(), r.GetTargetPath())
	}
	return ""
}

// ---- registration (what node-driver-registrar does) --------------------

type registrationService struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
}

func (r *registrationService) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              driverName,
		Endpoint:          r.endpoint,
		SupportedVersions: []string{"1.0.0"},
	}, nil
}

func (r *registrationService) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		log.Printf("registered with the kubelet")
	} else {
		log.Printf("the kubelet did not register the plugin: %s", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// ---- CSI identity --------------------------------------------------------

type identityService struct {
	csi.UnimplementedIdentityServer
}

func (*identityService) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: driverName, VendorVersion: driverVersion}, nil
}

// GetPluginCapabilities: none (no controller service: the attacher is not
// a CSI controller, and no topology).
func (*identityService) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (*identityService) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// ---- CSI node ------------------------------------------------------------

type nodeService struct {
	csi.UnimplementedNodeServer
	cfg NodeConfig
	m   Mounter
	mu  sync.Mutex // one volume operation at a time
}

func (n *nodeService) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{
			Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		}},
	}}}, nil
}

func (n *nodeService) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.cfg.NodeID, MaxVolumesPerNode: 0}, nil
}

// NodeStageVolume bind-mounts the volume's directory (made if missing) on
// the staging path.
func (n *nodeService) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	handle, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkRequest(handle, "staging_target_path", staging); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	src := filepath.Join(n.cfg.Root, handle)
	if err := makeVolumeDir(src); err != nil {
		return nil, status.Errorf(codes.Internal, "making %s: %v", src, err)
	}
	if err := n.bind(src, staging, false); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// NodeUnstageVolume unmounts the staging path (the kubelet removes it).
func (n *nodeService) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	handle, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkRequest(handle, "staging_target_path", staging); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.m.Unmount(staging); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// NodePublishVolume bind-mounts the staging path on the target path (made
// if missing), read-only when asked or when the access mode only reads.
func (n *nodeService) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	handle, target, staging := req.GetVolumeId(), req.GetTargetPath(), req.GetStagingTargetPath()
	if err := checkRequest(handle, "target_path", target); err != nil {
		return nil, err
	}
	if err := checkCapability(req.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	mode := req.GetVolumeCapability().GetAccessMode().GetMode()
	readOnly := req.GetReadonly() ||
		mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY ||
		mode == csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	n.mu.Lock()
	defer n.mu.Unlock()
	staged, err := n.m.Mounted(staging)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if !staged {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged at %s", handle, staging)
	}
	if err := n.bind(staging, target, readOnly); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume unmounts the target path and removes it.
func (n *nodeService) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	handle, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkRequest(handle, "target_path", target); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.m.Unmount(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing %s: %v", target, err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// bind mounts src on dst (made if missing) unless dst is a mount point
// already.
func (n *nodeService) bind(src, dst string, readOnly bool) error {
	mounted, err := n.m.Mounted(dst)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if mounted {
		return nil
	}
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return status.Errorf(codes.Internal, "making %s: %v", dst, err)
	}
	if err := n.m.Bind(src, dst, readOnly); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// makeVolumeDir makes a volume's directory, writable by any user of any
// pod (there is no fsGroup change: the CSIDriver's fsGroupPolicy is None).
func makeVolumeDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777)
}

// checkRequest checks what every volume call needs: a valid volume id and
// an absolute path.
func checkRequest(handle, pathField, path string) error {
	if handle == "" {
		return status.Error(codes.InvalidArgument, "volume_id is missing")
	}
	if err := ValidHandle(handle); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if path == "" {
		return status.Errorf(codes.InvalidArgument, "%s is missing", pathField)
	}
	if !filepath.IsAbs(path) {
		return status.Errorf(codes.InvalidArgument, "%s %q is not absolute", pathField, path)
	}
	return nil
}

// checkCapability checks the volume capability of a stage or publish call:
// there, of access type mount.
func checkCapability(vc *csi.VolumeCapability) error {
	if vc == nil {
		return status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	if vc.GetBlock() != nil {
		return status.Error(codes.InvalidArgument, "block volumes are not supported (access type mount only)")
	}
	if vc.GetMount() == nil {
		return status.Error(codes.InvalidArgument, "volume_capability has no access type (mount only)")
	}
	return nil
}
