package testcluster_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestEnforcerAway records what the enforcer does to pods' traffic while it is not running
// (docs/runtime.md, "What af requires of a cluster").
//
// kube-network-policies catches SIGINT alone:
//   - stopped as Kubernetes stops a pod (SIGTERM: a rollout, an eviction), or crashed, it ends
//     at once and leaves its table, which sends the first packet of each new connection of a
//     pod some policy selects to a queue nobody reads; the kernel drops it. Those pods' new
//     connections fail until it is back (pods no policy selects are not in its set and are
//     not affected). It fails closed.
//   - on SIGINT its shutdown deletes its table: until it is back every pod's new connections
//     pass unjudged, policies or not. It fails open.
//
// Cilium's agent leaves its datapath attached and its maps pinned, whether stopped (SIGTERM)
// or killed (SIGKILL): the last policies keep being enforced. It fails static.
//
// Each is undone before the next, and the enforcer is running again when the test ends.
func TestEnforcerAway(t *testing.T) {
	h := cluster(t)
	requireState(t, h, testcluster.StateEnforcing)
	if h.Enforcer != testcluster.EnforcerKubeNetworkPolicies && h.Enforcer != testcluster.EnforcerCilium {
		t.Fatalf("PRECONDITION: this test is of kube-network-policies and Cilium (make test runs it in their phases); this cluster runs %s", h.Enforcer)
	}
	ctx := ctxFor(t, 10*time.Minute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if o, err := h.Observe(ctx); err == nil && (o.KubeNetworkPolicies || o.CiliumProcess) {
			return
		}
		if err := testcluster.StartEnforcer(ctx, t.Logf); err != nil {
			t.Errorf("starting %s again: %v", h.Enforcer, err)
		}
	})
	denied := namespace(t, h)
	mustKubectl(t, h, fmt.Sprintf(defaultDeny, denied), "apply", "-f", "-")
	clientPod(t, h, denied, "client", nil)
	open := namespace(t, h)
	clientPod(t, h, open, "client", nil)
	public := escapeRoutes(h)[0]
	waitRoute(t, h, denied, "client", public, false)
	waitRoute(t, h, open, "client", public, true)

	restart := func(t *testing.T) {
		t.Helper()
		start := time.Now()
		if err := testcluster.StartEnforcer(ctx, t.Logf); err != nil {
			t.Fatal(err)
		}
		waitRoute(t, h, open, "client", public, true)
		waitRoute(t, h, denied, "client", public, false)
		t.Logf("enforcing as before %s after the start", time.Since(start).Round(time.Millisecond))
	}
	if h.Enforcer == testcluster.EnforcerCilium {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			t.Run(fmt.Sprintf("%s: its datapath stays, it fails static", sig), func(t *testing.T) {
				start := time.Now()
				if err := testcluster.StopEnforcer(ctx, sig, t.Logf); err != nil {
					t.Fatal(err)
				}
				t.Logf("cilium-agent gone %s after %s", time.Since(start).Round(time.Millisecond), sig)
				o, err := h.Observe(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if o.CiliumProcess || !o.CiliumDatapath {
					t.Errorf("after %s: the agent running %v, its datapath in place %v", sig, o.CiliumProcess, o.CiliumDatapath)
				}
				for i := range 5 {
					if ok, out := try(ctx, h, denied, "client", public); ok {
						t.Fatalf("try %d: a pod under default-deny got out with the agent away: %s", i+1, out)
					}
				}
				stillOpen(t, h, open, "client", public, 3)
				t.Logf("5 tries under default-deny all refused %s after the agent went; a pod without policies unaffected", time.Since(start).Round(time.Second))
				restart(t)
			})
		}
		return
	}
	t.Run("stopped as Kubernetes stops a pod (SIGTERM), it fails closed", func(t *testing.T) {
		if err := testcluster.StopEnforcer(ctx, syscall.SIGTERM, t.Logf); err != nil {
			t.Fatal(err)
		}
		o, err := h.Observe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !o.KubeNetworkPoliciesTable {
			t.Errorf("its table is gone after SIGTERM: %+v", o)
		}
		// Its queue has no reader: the kernel drops what it is sent. Pods no policy selects
		// were never in its pod set, so their traffic is not sent there.
		for i := range 5 {
			if ok, out := try(ctx, h, denied, "client", public); ok {
				t.Fatalf("try %d: a pod under default-deny got out with the enforcer stopped: %s", i+1, out)
			}
		}
		stillOpen(t, h, open, "client", public, 3)
		t.Logf("5 tries under default-deny all dropped; a pod without policies unaffected")
		restart(t)
	})
	t.Run("its own shutdown (SIGINT) fails open", func(t *testing.T) {
		start := time.Now()
		if err := testcluster.StopEnforcer(ctx, syscall.SIGINT, t.Logf); err != nil {
			t.Fatal(err)
		}
		t.Logf("stopped (SIGINT) in %s", time.Since(start).Round(time.Millisecond))
		waitRoute(t, h, denied, "client", public, true)
		t.Logf("a pod under default-deny reached the public address")
		restart(t)
	})
}
