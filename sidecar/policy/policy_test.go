package policy

import (
	"net/netip"
	"testing"

	"github.com/antifailure/af/manifest"
)

func mustNew(t *testing.T, e manifest.Egress) *Policy {
	t.Helper()
	p, err := New(e)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecidePrecedence(t *testing.T) {
	p := mustNew(t, manifest.Egress{
		Default: Block,
		Rules: []manifest.EgressRule{
			{Host: "*.stripe.com", Mode: Block},                      // 0
			{Host: "api.stripe.com", Mode: Allow},                    // 1: exact beats wildcard
			{Host: "*.files.stripe.com", Mode: Capture},              // 2: more literals beats fewer
			{Host: "api.*.example.org", Ports: []int{443}},           // 3: ports beat no ports
			{Host: "api.*.example.org", Mode: Block},                 // 4
			{Host: "mail.example.net", Mode: Capture},                // 5: first of equals wins
			{Host: "mail.example.net", Mode: Allow},                  // 6
			{Host: "*.example.net", Ports: []int{25}, Mode: Capture}, // 7
			{CIDR: "10.20.0.0/16", Ports: []int{5432}},               // 8
			{CIDR: "10.20.5.0/24", Mode: Block},                      // 9: longer prefix wins
		},
	})
	cases := []struct {
		host string
		port int
		mode string
		rule string
	}{
		{"api.stripe.com", 443, Allow, "egress.rules[1]: api.stripe.com"},
		{"API.Stripe.com.", 443, Allow, "egress.rules[1]: api.stripe.com"},
		{"dashboard.stripe.com", 443, Block, "egress.rules[0]: *.stripe.com"},
		{"a.files.stripe.com", 443, Capture, "egress.rules[2]: *.files.stripe.com"},
		{"stripe.com", 443, Block, "egress.default"},
		{"api.eu.example.org", 443, Allow, "egress.rules[3]: api.*.example.org"},
		{"api.eu.example.org", 80, Block, "egress.rules[4]: api.*.example.org"},
		{"mail.example.net", 587, Capture, "egress.rules[5]: mail.example.net"},
		{"smtp.example.net", 25, Capture, "egress.rules[7]: *.example.net"},
		{"smtp.example.net", 587, Block, "egress.default"},
		{"10.20.1.2", 5432, Allow, "egress.rules[8]: 10.20.0.0/16"},
		{"10.20.1.2", 22, Block, "egress.default"},
		{"10.20.5.9", 5432, Block, "egress.rules[9]: 10.20.5.0/24"},
		{"::ffff:10.20.1.2", 5432, Allow, "egress.rules[8]: 10.20.0.0/16"},
		{"unknown.test", 80, Block, "egress.default"},
	}
	for _, c := range cases {
		d := p.Decide(c.host, c.port)
		if d.Mode != c.mode || d.Rule != c.rule {
			t.Errorf("Decide(%s, %d) = %s by %q, want %s by %q", c.host, c.port, d.Mode, d.Rule, c.mode, c.rule)
		}
		if d.Reason == "" {
			t.Errorf("Decide(%s, %d): no reason", c.host, c.port)
		}
		if d.Allowed() != (c.mode == Allow) {
			t.Errorf("Allowed() = %t for %s", d.Allowed(), c.mode)
		}
	}
	if got := p.AllowedRanges(); len(got) != 1 || got[0] != netip.MustParsePrefix("10.20.0.0/16") {
		t.Errorf("AllowedRanges = %v", got)
	}
}

func TestDefaults(t *testing.T) {
	if d := mustNew(t, manifest.Egress{}).Decide("x.test", 80); d.Mode != Block {
		t.Errorf("empty default = %s, want block", d.Mode)
	}
	if d := mustNew(t, manifest.Egress{Default: Allow}).Decide("x.test", 80); d.Mode != Allow {
		t.Errorf("default allow = %s", d.Mode)
	}
	if d := mustNew(t, manifest.Egress{Rules: []manifest.EgressRule{{Host: "a.test"}}}).Decide("a.test", 1); d.Mode != Allow {
		t.Errorf("rule without mode = %s, want allow", d.Mode)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, e := range []manifest.Egress{
		{Default: "deny"},
		{Rules: []manifest.EgressRule{{Host: "*"}}},
		{Rules: []manifest.EgressRule{{Host: "a.test", Mode: "maybe"}}},
		{Rules: []manifest.EgressRule{{Host: "a.test", Ports: []int{0}}}},
		{Rules: []manifest.EgressRule{{}}},
		{Rules: []manifest.EgressRule{{Host: "a.test", CIDR: "10.0.0.0/8"}}},
		{Rules: []manifest.EgressRule{{CIDR: "169.254.0.0/16"}}},
	} {
		if _, err := New(e); err == nil {
			t.Errorf("New(%+v) accepted", e)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	var rules []manifest.EgressRule
	for _, h := range []string{"api.stripe.com", "*.stripe.com", "*.sentry.io", "api.*.example.org", "hooks.slack.com", "*.githubusercontent.com"} {
		rules = append(rules, manifest.EgressRule{Host: h})
	}
	p, err := New(manifest.Egress{Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		p.Decide("objects.githubusercontent.com", 443)
	}
}
