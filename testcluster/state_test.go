package testcluster

import (
	"strings"
	"testing"
)

// TestStateIs: what each state requires of what was read off the machine, on both enforcers.
func TestStateIs(t *testing.T) {
	kr := Observed{KubeRouter: true, KubeRouterProcess: true, KubeRouterChains: true, NodePortExemption: "32766:32767", PodIPv6Off: true}
	krHoles := Observed{KubeRouter: true, KubeRouterProcess: true, KubeRouterChains: true, NodePortExemption: "30000:32767"}
	knp := Observed{KubeNetworkPolicies: true, KubeNetworkPoliciesProcess: true, KubeNetworkPoliciesRules: true, KubeNetworkPoliciesTable: true, KubeNetworkPoliciesNode: true, PodIPv6Off: true}
	knpHoles := Observed{KubeNetworkPolicies: true, KubeNetworkPoliciesProcess: true, KubeNetworkPoliciesRules: true, KubeNetworkPoliciesTable: true}
	with := func(o Observed, f func(*Observed)) Observed { f(&o); return o }
	ds := with(kr, func(o *Observed) {
		o.PodIPv6Off, o.DualStack, o.KubeRouterIPv6, o.LinkLocalRule = false, true, true, true
	})
	tests := []struct {
		name  string
		state State
		o     Observed
		why   string // "" when the state holds
	}{
		{"kube-router hardened", StateEnforcing, kr, ""},
		{"kube-router, exemption open", StateEnforcing, with(kr, func(o *Observed) { o.NodePortExemption = "30000:32767" }), "exempts the whole NodePort range"},
		{"kube-router, IPv6 on", StateEnforcing, with(kr, func(o *Observed) { o.PodIPv6Off = false }), "keep IPv6"},
		{"kube-router holes", StateHoles, krHoles, ""},
		{"kube-router holes closed", StateHoles, kr, "no hole is open"},
		{"kube-router, the NodePort hole alone", StateHoles, with(krHoles, func(o *Observed) { o.PodIPv6Off = true }), ""},
		{"kube-router, the IPv6 hole alone", StateHoles, with(kr, func(o *Observed) { o.PodIPv6Off = false }), ""},
		{"kube-network-policies hardened", StateEnforcing, knp, ""},
		{"kube-network-policies, node not queued", StateEnforcing, with(knp, func(o *Observed) { o.KubeNetworkPoliciesNode = false }), "does not see pods' connections to the node"},
		{"kube-network-policies, nothing reads its queue", StateEnforcing, with(knp, func(o *Observed) { o.KubeNetworkPolicies, o.KubeNetworkPoliciesRules = false, false }), "no enforcer is enforcing"},
		{"kube-network-policies holes", StateHoles, knpHoles, ""},
		{"kube-network-policies holes, node queued", StateHoles, with(knpHoles, func(o *Observed) { o.KubeNetworkPoliciesNode = true }), ""},
		{"kube-network-policies holes closed", StateHoles, knp, "no hole is open"},
		{"two enforcers", StateEnforcing, with(knp, func(o *Observed) { o.KubeRouterProcess = true }), "two enforcers"},
		{"dual-stack, kube-router with IPv6 and the link-local rule", StateEnforcing, ds, ""},
		{"dual-stack, kube-router IPv4-only", StateEnforcing, with(ds, func(o *Observed) { o.KubeRouterIPv6 = false }), "not governed"},
		{"dual-stack, no link-local rule", StateEnforcing, with(ds, func(o *Observed) { o.LinkLocalRule = false }), "not governed"},
		{"dual-stack, the IPv6 hole (IPv4-only enforcer)", StateHoles, with(ds, func(o *Observed) { o.KubeRouterIPv6, o.LinkLocalRule = false, false }), ""},
		{"dual-stack holes closed", StateHoles, ds, "no hole is open"},
		{"kube-router, IPv6 on in pods but the link-local rule closes their segment", StateEnforcing, with(kr, func(o *Observed) { o.PodIPv6Off, o.LinkLocalRule = false, true }), ""},
		{"none", StateNoEnforcer, Observed{}, ""},
		{"none, but its table left behind", StateNoEnforcer, Observed{KubeNetworkPoliciesTable: true}, "an enforcer is there"},
		{"none, but kube-router runs", StateNoEnforcer, Observed{KubeRouterProcess: true}, "an enforcer is there"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.state.Is(tc.o)
			if ok != (tc.why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("%s.Is(%+v) = %v %q, want %v with %q", tc.state, tc.o, ok, why, tc.why == "", tc.why)
			}
		})
	}
}
