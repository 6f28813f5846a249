package kubernetes

import (
	"net/netip"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/antifailure/af/manifest"
)

func TestPolicies(t *testing.T) {
	e := testEnv()
	pols := map[string]*networkingv1.NetworkPolicy{}
	var order []string
	for _, p := range e.policies() {
		pols[p.Name] = p
		order = append(order, p.Name)
	}
	if order[0] != PolicyDenyAll || len(pols[PolicyDenyAll].Spec.PodSelector.MatchLabels) != 0 || len(pols[PolicyDenyAll].Spec.PolicyTypes) != 2 ||
		pols[PolicyDenyAll].Spec.Ingress != nil || pols[PolicyDenyAll].Spec.Egress != nil {
		t.Errorf("deny-all: %+v", pols[PolicyDenyAll].Spec)
	}
	if _, ok := pols[PolicyIngressCtl]; ok {
		t.Errorf("an ingress-controller policy without a domain")
	}
	for _, p := range pols {
		for _, r := range p.Spec.Ingress {
			for _, peer := range r.From {
				if peer.NamespaceSelector != nil {
					t.Errorf("%s admits by namespace", p.Name)
				}
			}
		}
		if p.Name == PolicySidecarOut {
			continue
		}
		for _, r := range p.Spec.Egress {
			for _, peer := range r.To {
				if peer.NamespaceSelector != nil || peer.IPBlock != nil {
					t.Errorf("%s lets services out beyond their environment: %+v", p.Name, peer)
				}
			}
		}
	}
	out := pols[PolicySidecarOut].Spec.Egress
	if len(out) != 3 {
		t.Fatalf("sidecar egress rules: %+v", out)
	}
	if b := out[0].To[0].IPBlock; b.CIDR != "0.0.0.0/0" || strings.Join(b.Except, ",") != "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16" {
		t.Errorf("public egress: %+v", b)
	}
	if r := out[1]; r.To[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "kube-system" || r.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" || len(r.Ports) != 2 {
		t.Errorf("resolver egress: %+v", r)
	}
	// The cidr allow rule opens its range, on its ports; the block rule opens nothing.
	if r := out[2]; r.To[0].IPBlock.CIDR != "10.20.0.0/16" || len(r.Ports) != 1 || r.Ports[0].Port.IntValue() != 5432 {
		t.Errorf("cidr egress: %+v", r)
	}

	e.IPv6 = true
	if got := e.sidecarEgress().Spec.Egress[1].To[0].IPBlock; got == nil || got.CIDR != "::/0" || len(got.Except) != 3 {
		t.Errorf("IPv6 egress: %+v", got)
	}
	e.IngressFrom = &IngressController{Namespace: "ingress", Labels: map[string]string{"app": "traefik"}}
	var ing *networkingv1.NetworkPolicy
	for _, p := range e.policies() {
		if p.Name == PolicyIngressCtl {
			ing = p
		}
	}
	if ing == nil || len(ing.Spec.Ingress[0].Ports) != 1 || ing.Spec.Ingress[0].Ports[0].Port.IntValue() != 8080 || ing.Spec.PodSelector.MatchLabels["dev.antifailure.kind"] != "web" {
		t.Errorf("ingress-controller policy: %+v", ing)
	}
}

// TestCIDRRulesNeverOpenTheCluster: a cidr allow rule's ipBlock leaves out every cluster range
// inside it, a rule the cluster's range holds whole opens nothing, and the sidecar's public
// egress leaves out cluster addresses outside the private ranges (a node's public address).
func TestCIDRRulesNeverOpenTheCluster(t *testing.T) {
	e := testEnv()
	e.Cluster = []netip.Prefix{
		netip.MustParsePrefix("10.244.0.0/24"), // pods
		netip.MustParsePrefix("10.244.0.1/32"), // the node, inside the pod range
		netip.MustParsePrefix("10.96.0.0/12"),  // Services
		netip.MustParsePrefix("198.51.100.7/32"),
	}
	e.Manifest.Egress.Rules = []manifest.EgressRule{
		{CIDR: "10.0.0.0/8", Ports: []int{5432}, Mode: "allow"},
		{CIDR: "10.244.0.0/24", Mode: "allow"}, // exactly the pod range: opens nothing
		{CIDR: "10.20.0.0/16", Mode: "allow"},  // a database's range, clear of the cluster
	}
	np := e.sidecarEgress()
	var blocks []string
	for _, r := range np.Spec.Egress {
		for _, p := range r.To {
			if p.IPBlock != nil {
				blocks = append(blocks, p.IPBlock.CIDR+" except "+strings.Join(p.IPBlock.Except, ","))
			}
		}
	}
	want := []string{
		"0.0.0.0/0 except 10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,169.254.0.0/16,198.51.100.7/32",
		"10.0.0.0/8 except 10.244.0.0/24,10.96.0.0/12",
		"10.20.0.0/16 except ",
	}
	if strings.Join(blocks, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ipBlocks:\n%s\nwant:\n%s", strings.Join(blocks, "\n"), strings.Join(want, "\n"))
	}
}
