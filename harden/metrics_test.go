package harden

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestMetrics feeds the agent's metrics the reports of a node's life (put in place, put back
// twice, one rule failing, a pass that could not read the node) and reads them as a scraper
// would, through the text format.
func TestMetrics(t *testing.T) {
	m := NewMetrics()
	at := time.Date(2026, 12, 7, 16, 0, 0, 0, time.UTC)
	kr := Found{Enforcer: KubeRouter}
	pass := func(states ...string) Report {
		rep := Report{Node: "n1", Found: kr, At: at}
		for i, s := range states {
			chain := []string{"AF-NODEPORT", "AF-LINK-LOCAL"}[i]
			tool := []string{"iptables", "ip6tables"}[i]
			rep.Rules = append(rep.Rules, RuleState{Chain: chain, Tool: tool, State: s})
		}
		return rep
	}
	scrape := func() string {
		rec := httptest.NewRecorder()
		promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	for _, c := range []struct {
		name string
		feed func()
		want []string
		not  []string
	}{
		{"first pass", func() { m.Observe(pass(StateApplied, StateApplied)) }, []string{
			`af_harden_rule_in_place{chain="AF-NODEPORT",tool="iptables"} 1`,
			`af_harden_rule_in_place{chain="AF-LINK-LOCAL",tool="ip6tables"} 1`,
			`af_harden_hardened 1`,
			`af_harden_enforcer{enforcer="kube-router"} 1`,
			`af_harden_passes_total{result="ok"} 1`,
			`af_harden_passes_total{result="failed"} 0`,
			`af_harden_last_pass_timestamp_seconds 1.7966592e+09`,
		}, []string{`af_harden_rules_put_back_total{`, `af_harden_rule_failures_total{`}},
		{"put back twice", func() {
			m.Observe(pass(StateReapplied, StateInPlace))
			m.Observe(pass(StateReapplied, StateInPlace))
		}, []string{
			`af_harden_rules_put_back_total{chain="AF-NODEPORT",tool="iptables"} 2`,
			`af_harden_rule_in_place{chain="AF-NODEPORT",tool="iptables"} 1`,
			`af_harden_passes_total{result="ok"} 3`,
		}, []string{`af_harden_rules_put_back_total{chain="AF-LINK-LOCAL"`}},
		{"a rule failing", func() { m.Observe(pass(StateInPlace, StateFailed)) }, []string{
			`af_harden_rule_in_place{chain="AF-LINK-LOCAL",tool="ip6tables"} 0`,
			`af_harden_rule_failures_total{chain="AF-LINK-LOCAL",tool="ip6tables"} 1`,
			`af_harden_hardened 0`,
		}, nil},
		{"the node unread", func() { m.PassFailed() }, []string{
			`af_harden_passes_total{result="failed"} 1`,
			`af_harden_passes_total{result="ok"} 4`,
		}, nil},
		{"no enforcer af knows, no rule", func() { m.Observe(Report{Node: "n1", At: at}) }, []string{
			`af_harden_enforcer{enforcer="none"} 1`,
			`af_harden_hardened 1`,
		}, []string{`af_harden_enforcer{enforcer="kube-router"}`, `af_harden_rule_in_place{`}},
	} {
		c.feed()
		got := scrape()
		for _, w := range c.want {
			if !strings.Contains(got, w+"\n") {
				t.Errorf("%s: the scrape lacks %q", c.name, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: the scrape has %q", c.name, n)
			}
		}
	}
}
