package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// route is one way out of a pod, tried with aftool inside the pod.
type route struct {
	name string
	cmd  []string
	want string // the output must contain this when the route works
}

// escapeRoutes are the routes to the fake internet and the fake metadata host (and on a
// dual-stack cluster their IPv6 twins and the node's listener over IPv6).
func escapeRoutes(h *testcluster.Handle) []route {
	in := h.Internet
	routes := []route{
		{"public TCP", []string{"aftool", "tcp", "-timeout", "2s", in.PublicTCP}, "ok"},
		{"public UDP", []string{"aftool", "udp", "-timeout", "2s", in.PublicUDP}, "ok"},
		{"public resolver UDP DNS", []string{"aftool", "dns", "-timeout", "2s", "-server", in.Resolver, in.AllowedAPIHost}, in.AllowedAPIIP},
		{"fake metadata HTTP", []string{"aftool", "http", "-timeout", "2s", "http://" + in.Metadata + "/latest/meta-data/"}, "af-fake-metadata"},
	}
	if h.DualStack {
		// The same hosts over IPv6, and the node's listener at its IPv6 address.
		routes = append(routes,
			route{"public TCP over IPv6", []string{"aftool", "tcp", "-timeout", "2s", in.PublicTCP6}, "ok"},
			route{"public UDP over IPv6", []string{"aftool", "udp", "-timeout", "2s", in.PublicUDP6}, "ok"},
			route{"public resolver over IPv6", []string{"aftool", "dns", "-timeout", "2s", "-server", in.Resolver6, in.AllowedAPIHost}, in.AllowedAPIIP},
			route{"fake metadata over IPv6", []string{"aftool", "http", "-timeout", "2s", "http://" + in.Metadata6 + "/latest/meta-data/"}, "af-fake-metadata"},
			route{"node service over IPv6", []string{"aftool", "tcp", "-timeout", "2s", h.NodeService6}, "ok"},
		)
	}
	return routes
}

// podRoutes are pod-to-pod routes to a server pod at ip.
func podRoutes(ip string) []route {
	return []route{
		{"pod TCP", []string{"aftool", "tcp", "-timeout", "2s", ip + ":8080"}, "ok"},
		{"pod UDP", []string{"aftool", "udp", "-timeout", "2s", ip + ":8081"}, "ok"},
	}
}

// try runs r from pod once and reports whether it worked.
func try(ctx context.Context, h *testcluster.Handle, ns, pod string, r route) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := execIn(ctx, h, ns, pod, r.cmd...)
	if err != nil {
		return false, fmt.Sprintf("%v %s", err, out)
	}
	return strings.Contains(out, r.want), out
}

// waitRoute polls r until it works (open) or fails (!open), for at most 60 s,
// and fails the test if it never gets there. Enforcers apply policies
// asynchronously; the wait is not a timing assertion.
func waitRoute(t *testing.T, h *testcluster.Handle, ns, pod string, r route, open bool) {
	t.Helper()
	ctx := ctxFor(t, 90*time.Second)
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for attempt := 1; ; attempt++ {
		ok, out := try(ctx, h, ns, pod, r)
		if ok == open {
			t.Logf("%-26s %s after %d attempt(s)", r.name, map[bool]string{true: "open", false: "blocked"}[open], attempt)
			return
		}
		last = out
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %s, still %s after %d attempts; last output: %s", r.name,
				map[bool]string{true: "open", false: "blocked"}[open], map[bool]string{true: "blocked", false: "open"}[open], attempt, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stillOpen asserts that r works on each of n tries.
func stillOpen(t *testing.T, h *testcluster.Handle, ns, pod string, r route, n int) {
	t.Helper()
	for i := range n {
		if ok, out := try(ctxFor(t, time.Minute), h, ns, pod, r); !ok {
			t.Fatalf("%s: blocked on try %d of %d: %s", r.name, i+1, n, out)
		}
	}
	t.Logf("%-26s open on %d of %d tries", r.name, n, n)
}

const defaultDeny = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny
  namespace: %s
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
`
