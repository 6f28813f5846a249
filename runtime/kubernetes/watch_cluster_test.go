package kubernetes

import (
	"context"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/testcluster"
)

// TestWatch: after a contained af up the probe stays and checks every route again; af status
// shows what it last saw. Containment broken after the start is shown at the next check, never
// passed over, and shown as contained again once it is back:
//   - the namespace's NetworkPolicies deleted: escaped, on every enforcer; af up puts them back;
//   - the enforcer stopped by SIGINT and by SIGTERM, then started again: what each enforcer
//     does is what the watch must show. kube-network-policies on SIGINT deletes its table and
//     fails open: escaped. On SIGTERM its table stays with no reader for its queue: every new
//     connection is dropped, the sidecar's too, so the probe cannot observe containment:
//     no-answer. kube-router leaves its rules in place either way: contained.
//   - the probe's pod deleted: absent, said as such.
func TestWatch(t *testing.T) {
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 20*time.Minute)
	const every = 5 * time.Second
	// A check's deadline of 20 s rather than 60: the check that cannot answer (the enforcer
	// dropping everything, the sidecar's traffic too) ends at it.
	const deadline = 20 * time.Second
	rt := f.runtime(t, func(o *Options) {
		o.Watch = every
		o.GateEnv = maps.Clone(o.GateEnv)
		o.GateEnv["AF_GATE_DEADLINE"] = deadline.String()
	})
	ref := afruntime.Ref{ID: "watch-test", Manifest: small(t, map[string]*manifest.Service{
		"svc": {Port: 8080, Command: manifest.Command{Exec: []string{"busybox", "httpd", "-f", "-p", "8080", "-h", "/"}}},
	})}
	down(t, rt, ref)
	t.Cleanup(func() {
		// Whatever a subtest left stopped is started again: later tests need the enforcer.
		c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if o, err := f.h.Observe(c); err == nil && (o.KubeRouterProcess || o.KubeNetworkPoliciesProcess) {
			return
		}
		if err := testcluster.StartEnforcer(c, t.Logf); err != nil {
			t.Errorf("starting the enforcer again: %v", err)
		}
	})
	up := func(t *testing.T) string {
		t.Helper()
		res, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
		if err != nil {
			t.Fatalf("af up: %v", err)
		}
		return res.Namespace
	}
	ns := up(t)

	// waitWatch reads af status until the watch reports want from a check that began after
	// since (a check under way at since may have tried its routes before), and returns it with
	// how long after since that check ended.
	waitWatch := func(t *testing.T, want string, since time.Time, within time.Duration) (*afruntime.Watch, time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		var last *afruntime.Watch
		for {
			st, err := rt.Status(ctx, ref)
			if err != nil {
				t.Fatalf("af status: %v", err)
			}
			w := st.Watch
			switch {
			case w == nil:
				t.Fatalf("af status reports no watch")
			case w.State == afruntime.WatchAbsent || w.State == afruntime.WatchStopped || w.State == afruntime.WatchStale:
				t.Fatalf("the watch is %s: %s", w.State, w.Detail)
			case w.At != nil && w.Last != nil && w.At.Add(-time.Duration(w.Last.MS*float64(time.Millisecond))).After(since):
				last = w
				if w.State == want {
					return w, w.At.Sub(since)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no check begun after %s said %s within %s; last: %+v", since.Format(time.StampMilli), want, within, last)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	// A check is at most every + the deadline away; the waits allow two.
	within := 2 * (every + deadline)

	w, _ := waitWatch(t, gate.Contained, time.Now(), within)
	if w.EverySeconds != every.Seconds() || !strings.Contains(w.Detail, "contained: every route denied") {
		t.Errorf("the watch after af up: %+v", w)
	}
	pod, err := f.kube.CoreV1().Pods(ns).Get(ctx, ProbeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the probe pod is not there after a contained af up: %v", err)
	}
	t.Logf("watch after af up: %s (probe pod %s, phase %s)", w.Detail, pod.Name, pod.Status.Phase)

	t.Run("policies deleted", func(t *testing.T) {
		broke := time.Now()
		if err := f.kube.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		w, after := waitWatch(t, gate.Escape, broke, within)
		if len(w.Last.Escaped) == 0 || !strings.Contains(w.Detail, "NOT CONTAINED") {
			t.Errorf("escaped without routes: %+v", w)
		}
		t.Logf("policies deleted: seen %s later: %s", after.Round(time.Millisecond), w.Detail)
		fixed := time.Now()
		up(t)
		w, after = waitWatch(t, gate.Contained, fixed, within)
		t.Logf("af up again: contained %s later", after.Round(time.Millisecond))
	})

	want := map[string]map[syscall.Signal]string{
		testcluster.EnforcerKubeNetworkPolicies: {syscall.SIGINT: gate.Escape, syscall.SIGTERM: gate.CannotAnswer},
		testcluster.EnforcerKubeRouter:          {syscall.SIGINT: gate.Contained, syscall.SIGTERM: gate.Contained},
	}[f.h.Enforcer]
	if want == nil {
		t.Fatalf("PRECONDITION: no expectation for enforcer %q", f.h.Enforcer)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run("enforcer stopped by "+sig.String(), func(t *testing.T) {
			stopped := time.Now()
			if err := testcluster.StopEnforcer(ctx, sig, t.Logf); err != nil {
				t.Fatal(err)
			}
			w, after := waitWatch(t, want[sig], stopped, within)
			t.Logf("%s stopped by %s: the watch says %s %s later: %s", f.h.Enforcer, sig, w.State, after.Round(time.Millisecond), w.Detail)
			started := time.Now()
			if err := testcluster.StartEnforcer(ctx, t.Logf); err != nil {
				t.Fatal(err)
			}
			w, after = waitWatch(t, gate.Contained, started, within)
			t.Logf("%s started again: contained %s later", f.h.Enforcer, after.Round(time.Millisecond))
		})
	}

	t.Run("probe pod deleted", func(t *testing.T) {
		zero := int64(0)
		if err := f.kube.CoreV1().Pods(ns).Delete(ctx, ProbeName, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := f.kube.CoreV1().Pods(ns).Get(ctx, ProbeName, metav1.GetOptions{}); err != nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		st, err := rt.Status(ctx, ref)
		if err != nil || st.Watch == nil || st.Watch.State != afruntime.WatchAbsent || !strings.Contains(st.Watch.Detail, "nothing checks containment") {
			t.Fatalf("status with the probe pod gone: %v %+v", err, st.Watch)
		}
	})
}
