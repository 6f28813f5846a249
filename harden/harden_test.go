package harden

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/antifailure/af/gate"
)

func TestDetect(t *testing.T) {
	kr, err := os.ReadFile("testdata/kube-router-ipv4.txt") // iptables-save of the test cluster, kube-router with its NodePort exemption open
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		t          Tables
		want       Enforcer
		first      int
		last       int
		queue      int
		wantIPv6   bool
		evidenceIn string
	}{
		{"kube-router", Tables{IPv4: string(kr)}, KubeRouter, 30000, 32767, -1, false, "KUBE-ROUTER-INPUT"},
		{"kube-router governing IPv6", Tables{IPv4: string(kr), IPv6: ":KUBE-ROUTER-FORWARD - [0:0]\n"}, KubeRouter, 30000, 32767, -1, true, "kube-router"},
		{"kube-network-policies", Tables{IPv4: "*filter\n:INPUT ACCEPT [0:0]\n", NFT: "table inet af_guard\ntable inet kube-network-policies\ntable ip filter\n",
			Queues: "  100   2910     0 2 65531     0     0        0  1\n"}, KubeNetworkPolicies, 0, 0, 100, true, "kube-network-policies"},
		{"kindnet", Tables{NFT: "table inet kindnet-network-policies\n"}, Kindnet, 0, 0, -1, true, "kindnet"},
		{"calico", Tables{IPv4: ":cali-INPUT - [0:0]\n"}, Calico, 0, 0, -1, false, "cali-"},
		{"cilium", Tables{IPv4: ":CILIUM_INPUT - [0:0]\n"}, Cilium, 0, 0, -1, false, "CILIUM_"},
		// A table only named like one is not one: the whole name's part must match.
		{"none", Tables{IPv4: "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m comment --comment \"KUBE-ROUTER-INPUT\" -j ACCEPT\n", NFT: "table ip nat\n"}, Unknown, 0, 0, -1, false, "no chain"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := Detect(c.t)
			if f.Enforcer != c.want || f.NodePortFirst != c.first || f.NodePortLast != c.last || f.Queue != c.queue || f.IPv6 != c.wantIPv6 || !strings.Contains(f.Evidence, c.evidenceIn) {
				t.Errorf("Detect = %+v", f)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	chains := func(rs []Rule) (out []string) {
		for _, r := range rs {
			out = append(out, r.Tool+"/"+r.Chain)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		n     Node
		want  []string
		notes string
	}{
		{"k3s: kube-router, a bridge, its NodePort range", Node{Found: Found{Enforcer: KubeRouter, NodePortFirst: 30000, NodePortLast: 32767, Queue: -1}, PodCIDRs: []string{"10.42.0.0/24"}, Bridges: []string{"cni0"}},
			[]string{"ip6tables/AF-LINK-LOCAL", "iptables/AF-NODEPORT"}, ""},
		{"kube-router dual-stack", Node{Found: Found{Enforcer: KubeRouter, NodePortFirst: 30000, NodePortLast: 32767, Queue: -1}, PodCIDRs: []string{"10.244.0.0/24", "fd61:af:244::/64"}, Bridges: []string{"af-cni0"}},
			[]string{"ip6tables/AF-LINK-LOCAL", "iptables/AF-NODEPORT", "ip6tables/AF-NODEPORT"}, ""},
		{"kind: kindnet, no bridge", Node{Found: Found{Enforcer: Kindnet, Queue: 100}, PodCIDRs: []string{"10.244.1.0/24"}},
			[]string{"iptables/AF-KNP-NODE"}, "no bridge"},
		{"kube-network-policies not reading its queue", Node{Found: Found{Enforcer: KubeNetworkPolicies, Queue: -1}, PodCIDRs: []string{"10.244.1.0/24"}, Bridges: []string{"af-cni0"}},
			[]string{"ip6tables/AF-LINK-LOCAL"}, "no process reads a netfilter queue"},
		{"no pod range", Node{Found: Found{Enforcer: KubeRouter, NodePortFirst: 30000, NodePortLast: 32767}}, nil, "no pod range"},
		{"calico", Node{Found: Found{Enforcer: Calico}, PodCIDRs: []string{"10.244.1.0/24"}}, nil, "af knows no hole"},
		{"cilium beside a bridge another CNI left", Node{Found: Found{Enforcer: Cilium, Queue: -1}, PodCIDRs: []string{"10.244.0.0/24"}, Bridges: []string{"af-cni0"}}, nil, "no link-local rule on af-cni0"},
		{"no enforcer", Node{Found: Found{Enforcer: Unknown}, PodCIDRs: []string{"10.244.1.0/24"}, Bridges: []string{"cni0"}}, nil, "nothing done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules, notes := Plan(c.n)
			if got := chains(rules); !slices.Equal(got, c.want) {
				t.Errorf("rules %v, want %v", got, c.want)
			}
			if c.notes != "" && !strings.Contains(strings.Join(notes, "\n"), c.notes) {
				t.Errorf("notes %q lack %q", notes, c.notes)
			}
			for _, r := range rules {
				if len(r.Rules) == 0 || len(r.Jumps) == 0 || len(r.Closes) == 0 {
					t.Errorf("%s: empty rule %+v", r.Chain, r)
				}
			}
		})
	}
	// The queue and the range are the ones found, not a default.
	r := KNPNode("iptables", []string{"10.244.1.0/24"}, 7)
	if !slices.Contains(r.Rules[0], "7") || !slices.Contains(r.Rules[0], "10.244.1.0/24") {
		t.Errorf("KNPNode: %v", r.Rules)
	}
	r = NodePort("ip6tables", []string{"fd61::/64"}, 31000, 31010)
	if !slices.Contains(r.Rules[0], "31000:31010") || !slices.Contains(r.Rules[1], "icmp6-adm-prohibited") {
		t.Errorf("NodePort: %v", r.Rules)
	}
}

// The route names advise.go compares with are the gate's.
func TestRouteNamesAreTheGates(t *testing.T) {
	for _, c := range [][2]string{
		{routeTCP, gate.RouteTCP}, {routeDNS, gate.RouteDNS}, {routeMetadata, gate.RouteMetadata}, {routeAPIServer, gate.RouteAPIServer},
		{routeLinkLocal, gate.RouteLinkLocal}, {routeNode, gate.RouteNode}, {routeNodeUnannounced, gate.RouteNodeUnannounced},
	} {
		if c[0] != c[1] {
			t.Errorf("harden compares with %q, the gate names the route %q", c[0], c[1])
		}
	}
}

func TestAdvise(t *testing.T) {
	o := func(route, target string) Open { return Open{route, target} }
	for _, c := range []struct {
		name  string
		open  []Open
		seen  Seen
		holes []string // each advice's routes and a word of its hole or fix
	}{
		{"contained", nil, Seen{Enforcer: KubeRouter}, nil},
		{"no enforcer", []Open{o(gate.RouteTCP, "198.51.100.10:80"), o(gate.RouteDNS, "198.51.100.53:53"), o(gate.RouteMetadata, "169.254.77.1:80"), o(gate.RouteAPIServer, "10.96.0.1:443"), o(gate.RouteNode+"-v6", "[fd00::1]:10250")},
			Seen{}, []string{"tcp-public,udp-dns,metadata,apiserver,node-local Run an enforcer"}},
		// k3s: the listener in the NodePort range is the exemption's; the kubelet outside it is not.
		{"k3s shape", []Open{o(gate.RouteLinkLocal, "ff02::1+neighbours"), o(gate.RouteNode, "10.244.0.1:30999"), o(gate.RouteNode, "10.244.0.1:30999/udp"), o(gate.RouteNodeUnannounced, "10.244.0.1:30000,32765 vs 29999"), o(gate.RouteNode, "10.244.0.1:10250")},
			Seen{Enforcer: KubeRouter, Bridges: []string{"cni0"}},
			[]string{"node-local,node-unannounced AF-NODEPORT", "ipv6-link-local AF-LINK-LOCAL", "node-local HostEndpoint"}},
		{"a narrowed range read by deploy/harden", []Open{o(gate.RouteNode, "10.244.0.1:30999")}, Seen{Enforcer: KubeRouter, NodePortFirst: 32766, NodePortLast: 32767},
			[]string{"node-local HostEndpoint"}},
		{"kind shape", []Open{o(gate.RouteAPIServer, "10.96.0.1:443"), o(gate.RouteNode, "10.244.0.1:10250")}, Seen{Enforcer: Kindnet},
			[]string{"apiserver,node-local AF-KNP-NODE"}},
		{"hardened yet open", []Open{o(gate.RouteLinkLocal, "ff02::1+neighbours")}, Seen{Enforcer: KubeRouter, Hardened: true},
			[]string{"ipv6-link-local reports on every node"}},
		{"calico, node and metadata open", []Open{o(gate.RouteNode, "10.0.0.1:10250"), o(gate.RouteMetadata, "169.254.77.1:80")}, Seen{Enforcer: Calico},
			[]string{"node-local HostEndpoint", "metadata IMDSv2"}},
		{"a route af has no word for", []Open{o("sctp-something", "x")}, Seen{Enforcer: KubeRouter}, []string{"sctp-something knows no cause"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Advise(c.open, c.seen)
			if len(got) != len(c.holes) {
				t.Fatalf("%d advices, want %d: %+v", len(got), len(c.holes), got)
			}
			for i, h := range c.holes {
				routes, word, _ := strings.Cut(h, " ")
				if strings.Join(got[i].Routes, ",") != routes || !strings.Contains(got[i].Hole+" "+got[i].Fix, word) {
					t.Errorf("advice %d = %+v, want %s with %q", i, got[i], routes, word)
				}
			}
			// Every open target is in exactly one advice.
			n := 0
			for _, a := range got {
				n += len(a.Targets)
			}
			if n != len(c.open) {
				t.Errorf("%d targets advised, %d open", n, len(c.open))
			}
		})
	}
}
