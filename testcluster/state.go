package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster/internal/node"
)

// Observed is the cluster's containment state read off the machine now (the enforcer's
// process and iptables chains, the NodePort exemption kube-router keeps, the CNI configuration
// new pods get), never from what was recorded when it started.
type Observed = node.Observed

// State is a containment state of the test cluster that a test needs.
type State string

// The states make test puts the cluster in, one phase each.
const (
	// StateEnforcing: an enforcer enforcing (kube-router with its NodePort exemption
	// narrowed, or kube-network-policies), IPv6 off in pods, or on a dual-stack cluster
	// governed (kube-router with IPv6 and the link-local rule).
	StateEnforcing State = "enforcing"
	// StateHoles: an enforcer enforcing, with one hole or both open (the variant af must
	// refuse): IPv6 left on in pods; the node open past the policies (under kube-router its
	// whole NodePort range exempt, under kube-network-policies pods' connections to the node
	// not queued). Which are open is read off the machine (Observe).
	StateHoles State = "holes"
	// StateNoEnforcer: no NetworkPolicy enforcer at all (default-deny blocks nothing).
	StateNoEnforcer State = "no-enforcer"
)

// Observe reads the running cluster's containment state off the machine.
func (h *Handle) Observe(ctx context.Context) (Observed, error) {
	c, err := cluster(Options{})
	if err != nil {
		return Observed{}, err
	}
	return c.Observe(ctx)
}

// Is reports whether what was observed is state s, and if not, why.
func (s State) Is(o Observed) (bool, string) {
	open := "30000:32767"
	switch s {
	case StateEnforcing:
		switch {
		case o.KubeNetworkPolicies && o.KubeRouterProcess:
			return false, "two enforcers run at once"
		case !o.KubeRouter && !o.KubeNetworkPolicies && !o.Cilium:
			return false, "no enforcer is enforcing (kube-router: process alive " + yes(o.KubeRouterProcess) + ", chains in iptables " + yes(o.KubeRouterChains) +
				"; kube-network-policies: process alive " + yes(o.KubeNetworkPoliciesProcess) + ", queue rules with a reader " + yes(o.KubeNetworkPoliciesRules) +
				"; cilium: process alive " + yes(o.CiliumProcess) + ", datapath attached " + yes(o.CiliumDatapath) + ")"
		case o.KubeNetworkPolicies && !o.KubeNetworkPoliciesNode:
			return false, "kube-network-policies does not see pods' connections to the node (no AF-KNP-NODE rule in INPUT)"
		case o.KubeRouter && o.NodePortExemption == open && !o.NodePortGuard:
			return false, "kube-router exempts the whole NodePort range " + open + " (and no AF-NODEPORT rule refuses pods' connections there)"
		case o.DualStack && !o.IPv6Governed():
			return false, "pods have IPv6 (dual-stack) and it is not governed (kube-router with IPv6 " + yes(o.KubeRouterIPv6) + ", the link-local rule " + yes(o.LinkLocalRule) + ")"
		case !o.IPv6Governed():
			return false, "new pods keep IPv6 (the CNI configuration does not turn it off)"
		}
	case StateHoles:
		switch {
		case !o.KubeRouter && !o.KubeNetworkPolicies:
			return false, "no enforcer is enforcing (kube-router: process alive " + yes(o.KubeRouterProcess) + ", chains in iptables " + yes(o.KubeRouterChains) +
				"; kube-network-policies: process alive " + yes(o.KubeNetworkPoliciesProcess) + ", queue rules with a reader " + yes(o.KubeNetworkPoliciesRules) + ")"
		case o.IPv6Governed() && o.KubeNetworkPolicies && o.KubeNetworkPoliciesNode:
			return false, "no hole is open: IPv6 is off in pods, and pods' connections to the node go to kube-network-policies' queue (AF-KNP-NODE)"
		case o.IPv6Governed() && o.KubeRouter && (o.NodePortExemption != open || o.NodePortGuard):
			return false, "no hole is open: IPv6 is off in pods or governed, and kube-router exempts " + orNone(o.NodePortExemption) + ", not " + open + ", or AF-NODEPORT refuses pods' connections there"
		}
	case StateNoEnforcer:
		if o.KubeRouterProcess || o.KubeRouterChains {
			return false, "an enforcer is there (kube-router process alive " + yes(o.KubeRouterProcess) + ", its chains in iptables " + yes(o.KubeRouterChains) + ")"
		}
		if o.KubeNetworkPoliciesProcess || o.KubeNetworkPoliciesTable {
			return false, "an enforcer is there (kube-network-policies process alive " + yes(o.KubeNetworkPoliciesProcess) + ", its table in nftables " + yes(o.KubeNetworkPoliciesTable) + ")"
		}
		if o.CiliumProcess || o.CiliumDatapath {
			return false, "an enforcer is there (cilium-agent process alive " + yes(o.CiliumProcess) + ", its datapath attached " + yes(o.CiliumDatapath) + ")"
		}
	default:
		return false, "unknown state " + string(s)
	}
	return true, ""
}

// RequireState fails t unless the cluster, read off the machine now, is in state s. A test
// that needs a state never skips for another: make test runs each test in the phase that has
// its state, so a mismatch is a mistake in the run (or a hole that did not open), and a
// negative control that ran on the wrong cluster would prove nothing.
func (h *Handle) RequireState(t testing.TB, s State) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := h.Observe(ctx)
	if err != nil {
		t.Fatalf("reading the cluster's containment state: %v", err)
	}
	if ok, why := s.Is(o); !ok {
		t.Fatalf("PRECONDITION: this test needs the cluster %s, and it is not: %s (observed %+v)", s, why, o)
	}
	t.Logf("precondition read off the cluster: %s (%+v)", s, o)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
