package main

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, cidr, ip string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Spec.PodCIDR = cidr
	if cidr != "" {
		n.Spec.PodCIDRs = []string{cidr}
	}
	if ip != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}, {Type: corev1.NodeInternalIP, Address: ip}}
	}
	return n
}

func TestDesiredRoutesToEveryOtherNodeWithACIDRAndAnAddress(t *testing.T) {
	nodes := []corev1.Node{
		node("w2", "10.244.2.0/24", "172.18.0.4"),
		node("cp", "10.244.0.0/24", "172.18.0.2"),
		node("w1", "10.244.1.0/24", "172.18.0.3"),
		node("new", "", "172.18.0.5"),     // no CIDR yet
		node("noip", "10.244.3.0/24", ""), // no address yet
	}
	got := Desired("w1", nodes)
	want := Plan{PodCIDR: "10.244.1.0/24", Routes: []Route{
		{Dst: "10.244.0.0/24", Via: "172.18.0.2"},
		{Dst: "10.244.2.0/24", Via: "172.18.0.4"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestDesiredTakesTheIPv4CIDRAndAddressOfADualStackNode(t *testing.T) {
	n := node("w2", "fd00:10:244::/64", "")
	n.Spec.PodCIDRs = []string{"fd00:10:244::/64", "10.244.2.0/24"}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "fc00::4"}, {Type: corev1.NodeInternalIP, Address: "172.18.0.4"}}
	got := Desired("w1", []corev1.Node{n})
	if len(got.Routes) != 1 || got.Routes[0] != (Route{Dst: "10.244.2.0/24", Via: "172.18.0.4"}) {
		t.Fatalf("got %+v", got)
	}
}

func TestConflistIsTheBridgeOnThePodCIDRWithoutMasquerade(t *testing.T) {
	b, err := Conflist("10.244.1.0/24")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Plugins []struct {
			Type         string `json:"type"`
			IPMasq       *bool  `json:"ipMasq"`
			ForceAddress bool   `json:"forceAddress"`
			IPAM         struct {
				Ranges [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Plugins[0].Type != "bridge" || c.Plugins[0].IPMasq == nil || *c.Plugins[0].IPMasq || !c.Plugins[0].ForceAddress {
		t.Fatalf("%s", b)
	}
	if c.Plugins[0].IPAM.Ranges[0][0]["subnet"] != "10.244.1.0/24" || c.Plugins[1].Type != "portmap" {
		t.Fatalf("%s", b)
	}
	if _, err := Conflist("not a cidr"); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
}
