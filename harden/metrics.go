package harden

// The agent's metrics, on a registry of its own (no global state), in Prometheus text format:
// what `af harden --metrics-address` serves at /metrics.

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the agent's gauges and counters, fed one report at a time (Observe) and one
// failed pass at a time (PassFailed).
type Metrics struct {
	Registry *prometheus.Registry

	mu       sync.Mutex
	rule     *prometheus.GaugeVec
	putBack  *prometheus.CounterVec
	failures *prometheus.CounterVec
	passes   *prometheus.CounterVec
	hardened prometheus.Gauge
	last     prometheus.Gauge
	enforcer *prometheus.GaugeVec
}

// NewMetrics registers the agent's metrics on a new registry.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		rule: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "af_harden_rule_in_place",
			Help: "1 when the rule (its chain in its tool, iptables or ip6tables) is in place on the node after the last pass, 0 when it could not be put in place."},
			[]string{"chain", "tool"}),
		putBack: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_harden_rules_put_back_total",
			Help: "Rules found removed or changed and put back since the agent started."},
			[]string{"chain", "tool"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_harden_rule_failures_total",
			Help: "Passes in which a rule could not be put in place (the report's error says why)."},
			[]string{"chain", "tool"}),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_harden_passes_total",
			Help: "Passes by result: ok (the node read and every rule tried), failed (the node could not be read; tried again at the next period)."},
			[]string{"result"}),
		hardened: prometheus.NewGauge(prometheus.GaugeOpts{Name: "af_harden_hardened",
			Help: "1 when the last pass left every rule the node's enforcer needs in place, else 0."}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{Name: "af_harden_last_pass_timestamp_seconds",
			Help: "When the last pass that read the node ended (Unix time)."}),
		enforcer: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "af_harden_enforcer",
			Help: `1, labelled with the enforcer the last pass found ("none" when af knows none).`},
			[]string{"enforcer"}),
	}
	for _, r := range []string{"ok", "failed"} {
		m.passes.WithLabelValues(r)
	}
	reg.MustRegister(m.rule, m.putBack, m.failures, m.passes, m.hardened, m.last, m.enforcer,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Observe records one pass's report.
func (m *Metrics) Observe(rep Report) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passes.WithLabelValues("ok").Inc()
	m.last.Set(float64(rep.At.UnixNano()) / 1e9)
	enf := string(rep.Found.Enforcer)
	if enf == "" {
		enf = "none"
	}
	m.enforcer.Reset()
	m.enforcer.WithLabelValues(enf).Set(1)
	m.rule.Reset()
	for _, r := range rep.Rules {
		in := 1.0
		switch r.State {
		case StateFailed:
			in = 0
			m.failures.WithLabelValues(r.Chain, r.Tool).Inc()
		case StateReapplied:
			m.putBack.WithLabelValues(r.Chain, r.Tool).Inc()
		}
		m.rule.WithLabelValues(r.Chain, r.Tool).Set(in)
	}
	if rep.Hardened() {
		m.hardened.Set(1)
	} else {
		m.hardened.Set(0)
	}
}

// PassFailed records a pass that could not read the node.
func (m *Metrics) PassFailed() {
	m.passes.WithLabelValues("failed").Inc()
}
