// kind-cni: the pod network of nodefall's kind clusters, built from the Go
// module proxy (kindnetd and flannel are not: see docs). On every node it
// writes the CNI configuration for the node's pod CIDR (Debian's bridge,
// host-local and portmap plugins do the rest) and keeps a route to every
// other node's pod CIDR via that node's InternalIP, from the moment the
// node has one: cross-node pod traffic never needs the default route.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// routeProtocol marks the routes this daemon owns, so it removes only those.
const routeProtocol = netlink.RouteProtocol(0x4e) // 'N'

func main() {
	confPath := flag.String("cni-conf", "/etc/cni/net.d/10-nodefall.conflist", "where the CNI configuration goes")
	resync := flag.Duration("resync", 30*time.Second, "how often the whole state is applied again")
	flag.Parse()
	self := os.Getenv("NODE_NAME")
	if self == "" {
		log.Fatal("NODE_NAME is not set (the DaemonSet passes spec.nodeName)")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Fatalf("in-cluster configuration: %v", err)
	}
	// kind adds the API server's address on the node network (the manifest
	// asks it to): the Service IP needs kube-proxy's rules, which may not be
	// written yet, and a packet to it before then must not go anywhere.
	if ep := os.Getenv("CONTROL_PLANE_ENDPOINT"); ep != "" {
		cfg.Host = "https://" + ep
	}
	client := kubernetes.NewForConfigOrDie(cfg)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(client, *resync)
	nodes := factory.Core().V1().Nodes()
	changed := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    poke,
		UpdateFunc: func(_, n any) { poke(n) },
		DeleteFunc: poke,
	}); err != nil {
		log.Fatalf("watching nodes: %v", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		log.Fatal("the node cache never synced")
	}
	tick := time.NewTicker(*resync)
	defer tick.Stop()
	for {
		list, err := nodes.Lister().List(labels.Everything())
		if err != nil {
			log.Printf("listing nodes: %v", err)
		} else {
			all := make([]corev1.Node, 0, len(list))
			for _, n := range list {
				all = append(all, *n)
			}
			if err := apply(Desired(self, all), *confPath); err != nil {
				log.Printf("applying: %v", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}

// apply writes the CNI configuration (when the pod CIDR is known and the
// file differs) and makes this daemon's routes exactly the plan's.
func apply(p Plan, confPath string) error {
	if p.PodCIDR != "" {
		conf, err := Conflist(p.PodCIDR)
		if err != nil {
			return err
		}
		if err := writeIfChanged(confPath, conf); err != nil {
			return err
		}
	}
	want := map[string]Route{}
	for _, r := range p.Routes {
		want[r.Dst] = r
		_, dst, err := net.ParseCIDR(r.Dst)
		if err != nil {
			return err
		}
		route := netlink.Route{Dst: dst, Gw: net.ParseIP(r.Via), Protocol: routeProtocol}
		if err := netlink.RouteReplace(&route); err != nil {
			return fmt.Errorf("route %s via %s: %w", r.Dst, r.Via, err)
		}
	}
	have, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routeProtocol}, netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range have {
		if r.Dst == nil {
			continue
		}
		if _, ok := want[r.Dst.String()]; !ok {
			if err := netlink.RouteDel(&r); err != nil {
				return fmt.Errorf("removing route %s: %w", r.Dst, err)
			}
		}
	}
	return nil
}

func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
