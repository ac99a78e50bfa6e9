package main

import (
	"encoding/json"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Route is one cross-node route: the pod CIDR of another node, via its
// InternalIP on the node network.
type Route struct {
	Dst string // CIDR
	Via string // IP
}

// Plan is what a node should hold: its own pod CIDR (for the CNI
// configuration) and a route to every other node's pod CIDR.
type Plan struct {
	PodCIDR string
	Routes  []Route
}

// Desired computes the plan of the node named self from the nodes the API
// server lists. Nodes without a pod CIDR or an InternalIP yet are left out
// (they come back in a later event); an IPv6 CIDR or address is ignored.
func Desired(self string, nodes []corev1.Node) Plan {
	var p Plan
	for _, n := range nodes {
		cidr := ipv4CIDR(n.Spec.PodCIDRs, n.Spec.PodCIDR)
		if cidr == "" {
			continue
		}
		if n.Name == self {
			p.PodCIDR = cidr
			continue
		}
		ip := internalIPv4(n.Status.Addresses)
		if ip == "" {
			continue
		}
		p.Routes = append(p.Routes, Route{Dst: cidr, Via: ip})
	}
	sort.Slice(p.Routes, func(i, j int) bool { return p.Routes[i].Dst < p.Routes[j].Dst })
	return p
}

func ipv4CIDR(cidrs []string, cidr string) string {
	all := append([]string{cidr}, cidrs...)
	for _, c := range all {
		ip, _, err := net.ParseCIDR(c)
		if err == nil && ip.To4() != nil {
			return c
		}
	}
	return ""
}

func internalIPv4(addrs []corev1.NodeAddress) string {
	for _, a := range addrs {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip := net.ParseIP(a.Address); ip != nil && ip.To4() != nil {
			return a.Address
		}
	}
	return ""
}

// Conflist renders the node's CNI configuration: Debian's bridge,
// host-local and portmap plugins (containernetworking-plugins) on the pod
// CIDR, the bridge as the pods' gateway. No masquerade: nothing of a test
// cluster is meant to leave the node network. A Node deleted and registered
// again gets a new pod CIDR: forceAddress lets the bridge plugin replace the
// old gateway address on cni0 (else every new pod's sandbox fails with
// "cni0 already has an IP address different from ...").
func Conflist(podCIDR string) ([]byte, error) {
	if _, _, err := net.ParseCIDR(podCIDR); err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", podCIDR, err)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "nodefall",
		"plugins": []any{
			map[string]any{
				"type":         "bridge",
				"bridge":       "cni0",
				"isGateway":    true,
				"forceAddress": true,
				"ipMasq":       false,
				"hairpinMode":  true,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}
