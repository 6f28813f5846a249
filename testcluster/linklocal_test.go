package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestLinkLocalRule: on an IPv4-only cluster whose pods keep IPv6 (the IPv6 hole open: no tuning
// plugin, as on k3s), the link-local rule alone closes the segment the probe's ipv6-link-local
// route looks at, for a pod under default-deny, and removing it opens the segment again. This
// is the rule deploy/harden's agent puts on k3s' node (make k8s-conformance), the product's own
// code (package harden), tried here with the same enforcer, kube-router, and the same CNI, a
// bridge.
func TestLinkLocalRule(t *testing.T) {
	h := cluster(t)
	requireState(t, h, testcluster.StateHoles)
	o, err := h.Observe(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if o.DualStack || o.PodIPv6Off || o.LinkLocalRule {
		t.Fatalf("PRECONDITION: this test needs an IPv4-only cluster whose pods keep IPv6 and no link-local rule (afcluster holes open ipv6): %+v", o)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testcluster.SetLinkLocalRule(ctx, false); err != nil {
			t.Errorf("removing the link-local rule: %v", err)
		}
	})
	ns := namespace(t, h)
	serverPod(t, h, ns, "neighbour", map[string]string{"app": "neighbour"})
	clientPod(t, h, ns, "client", map[string]string{"app": "client"})
	mustKubectl(t, h, fmt.Sprintf(defaultDeny, ns), "apply", "-f", "-")
	// The gate's own link-local route, run in the pod (aftool linklocal): an echo and a DNS
	// query to ff02::1, then TCP to every neighbour learnt.
	segment := route{"the IPv6 link-local segment", []string{"aftool", "linklocal", "-timeout", "2s"}, "linklocal answered"}

	t.Run("open without the rule, whatever the policies say", func(t *testing.T) {
		waitRoute(t, h, ns, "client", segment, true)
	})
	t.Run("closed with the rule", func(t *testing.T) {
		if err := testcluster.SetLinkLocalRule(ctxFor(t, 30*time.Second), true); err != nil {
			t.Fatal(err)
		}
		o, err := h.Observe(ctxFor(t, 30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if !o.LinkLocalRule || !o.IPv6Governed() {
			t.Fatalf("the rule is in place but not read off the machine: %+v", o)
		}
		waitRoute(t, h, ns, "client", segment, false)
		_, out := try(ctxFor(t, time.Minute), h, ns, "client", segment)
		t.Logf("with the rule: %s", out)
	})
	t.Run("open again without it", func(t *testing.T) {
		if err := testcluster.SetLinkLocalRule(ctxFor(t, 30*time.Second), false); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, h, ns, "client", segment, true)
	})
}
