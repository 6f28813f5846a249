package kubernetes

import (
	"testing"

	"github.com/antifailure/af/gate"
)

// TestEscapeRoutes: a refusal names the routes still open in the deciding round first, and
// those that got out only in an earlier round apart from them.
func TestEscapeRoutes(t *testing.T) {
	a := func(route, target string, o gate.Outcome) gate.Attempt {
		return gate.Attempt{Route: route, Target: target, Outcome: o}
	}
	for _, c := range []struct {
		name string
		res  gate.Result
		want string
	}{
		{"open now, and earlier only",
			gate.Result{
				Routes:  []gate.Attempt{a("apiserver", "10.96.0.1:443", gate.Denied), a("tcp-public-v6", "[2001:db8:af::10]:80", gate.Escaped), a("node-local-v6", "[fd61:af:244::1]:30999/udp", gate.Escaped)},
				Escaped: []gate.Attempt{a("apiserver", "10.96.0.1:443", gate.Escaped), a("node-local-v6", "[fd61:af:244::1]:30999/udp", gate.Escaped), a("tcp-public-v6", "[2001:db8:af::10]:80", gate.Escaped)},
			},
			"node-local-v6 ([fd61:af:244::1]:30999/udp), tcp-public-v6 ([2001:db8:af::10]:80); in an earlier round only, while the policies were being applied: apiserver (10.96.0.1:443)"},
		{"open now only",
			gate.Result{Routes: []gate.Attempt{a("tcp-public", "198.51.100.10:80", gate.Escaped)}, Escaped: []gate.Attempt{a("tcp-public", "198.51.100.10:80", gate.Escaped)}},
			"tcp-public (198.51.100.10:80)"},
		{"one target of a route open, another earlier only",
			gate.Result{
				Routes:  []gate.Attempt{a("node-local", "10.244.0.1:10250", gate.Denied), a("node-local", "10.244.0.1:30999", gate.Escaped)},
				Escaped: []gate.Attempt{a("node-local", "10.244.0.1:10250", gate.Escaped), a("node-local", "10.244.0.1:30999", gate.Escaped)},
			},
			"node-local (10.244.0.1:30999); in an earlier round only, while the policies were being applied: node-local (10.244.0.1:10250)"},
	} {
		if got := escapeRoutes(c.res); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
