// kind-csi: a small CSI driver for nodefall's kind clusters, built from the
// Go module proxy (the upstream csi-driver-host-path, external-attacher and
// node-driver-registrar are not: see README.md). A volume is a directory of
// a host directory every node mounts (the shared root), so its data outlives
// a node like a network disk's; attaching is real: a volume only one node
// may write is refused to a second node until the first one detaches it.
//
//	--mode=attacher  one replica: VolumeAttachments of the driver are
//	                 published to / unpublished from their node (a record
//	                 file a volume in the shared root), status by
//	                 server-side apply; in the cluster (a pod's service
//	                 account) or, with --kubeconfig, outside it (nodefall's
//	                 simulated clusters run it as a process of their own)
//	--mode=node      every node: the CSI identity and node services
//	                 (bind mounts) and the kubelet's plugin registration
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"
)

const (
	driverName    = "csi.nodefall.dev"
	driverVersion = "v0.1.0"
	// finalizer is the upstream external-attacher's for this driver:
	// "external-attacher/" + the driver name with dots as dashes.
	finalizer    = "external-attacher/csi-nodefall-dev"
	fieldManager = "nodefall-csi-attacher"
)

func main() {
	mode := flag.String("mode", "", "attacher or node")
	root := flag.String("root", "/nodefall/shared/csi", "the shared directory the volumes (and the attacher's records) live in")
	csiAddress := flag.String("csi-address", "/var/lib/kubelet/plugins/"+driverName+"/csi.sock", "node: the CSI socket (the same path on the host)")
	regPath := flag.String("registration-path", "/var/lib/kubelet/plugins_registry/"+driverName+"-reg.sock", "node: the kubelet plugin registration socket")
	kubeconfig := flag.String("kubeconfig", "", "attacher: a kubeconfig file to reach the API server with (default: the pod's in-cluster configuration)")
	resync := flag.Duration("resync", 10*time.Minute, "attacher: how often every VolumeAttachment is reconciled again")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch *mode {
	case "attacher":
		if err := runAttacher(ctx, *kubeconfig, *root, *resync); err != nil {
			log.Fatalf("attacher: %v", err)
		}
	case "node":
		nodeID := os.Getenv("NODE_NAME")
		if nodeID == "" {
			log.Fatal("NODE_NAME is not set (the DaemonSet passes spec.nodeName)")
		}
		if err := runNode(ctx, NodeConfig{
			NodeID:           nodeID,
			Root:             *root,
			CSIAddress:       *csiAddress,
			RegistrationPath: *regPath,
		}); err != nil {
			log.Fatalf("node: %v", err)
		}
	default:
		log.Fatalf("--mode must be attacher or node, not %q", *mode)
	}
}
