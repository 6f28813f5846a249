package app

// The App's metrics, on a registry of its own (no global state), in Prometheus text format.

import (
	"strings"
	"time"

	"github.com/antifailure/af/github/report"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the App's counters, gauges and histograms.
type Metrics struct {
	Registry   *prometheus.Registry
	deliveries *prometheus.CounterVec
	teardowns  *prometheus.HistogramVec
	sweeps     *prometheus.CounterVec
	removals   *prometheus.CounterVec
}

// NewMetrics registers the App's metrics; depth and remaining are read at each scrape.
func NewMetrics(depth func() int, remaining func() int) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_deliveries_total",
			Help: "Webhook deliveries by event, action and result (queued, duplicate, ignored, acknowledged, bad-signature, bad-request)."},
			[]string{"event", "action", "result"}),
		teardowns: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "af_app_teardown_duration_seconds",
			Help:    "How long one teardown attempt took (environments removed, comment rewritten, deployment inactive), by result.",
			Buckets: []float64{0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}},
			[]string{"result"}),
		sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_reaper_sweeps_total",
			Help: "Reaper sweeps by result (ok, partial: GitHub could not be asked about some repositories, error)."},
			[]string{"result"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_reaper_removals_total",
			Help: "Environments the reaper queued for removal, by reason (closed, merged, expired)."},
			[]string{"reason"}),
	}
	reg.MustRegister(m.deliveries, m.teardowns, m.sweeps, m.removals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "af_app_queue_depth", Help: "Teardowns waiting for a worker."},
			func() float64 { return float64(depth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "af_app_github_rate_limit_remaining",
			Help: "The last X-RateLimit-Remaining GitHub sent (-1 before any request)."},
			func() float64 { return float64(remaining()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Delivery counts one webhook delivery.
func (m *Metrics) Delivery(event, action, result string) {
	if event == "" {
		event = "unknown"
	}
	m.deliveries.WithLabelValues(event, action, result).Inc()
}

// Teardown observes one teardown attempt.
func (m *Metrics) Teardown(d time.Duration, result string) {
	m.teardowns.WithLabelValues(result).Observe(d.Seconds())
}

// Sweep counts one reaper sweep and its removals.
func (m *Metrics) Sweep(s *Sweep, err error) {
	result := "ok"
	switch {
	case err != nil:
		result = "error"
	case s != nil && len(s.Errors) > 0:
		result = "partial"
	}
	m.sweeps.WithLabelValues(result).Inc()
	if s == nil || s.DryRun {
		return
	}
	for _, r := range s.Removals {
		reason := "closed"
		switch {
		case strings.HasPrefix(r.Reason, report.ReasonExpired):
			reason = "expired"
		case r.Reason == report.ReasonMerged:
			reason = "merged"
		}
		m.removals.WithLabelValues(reason).Inc()
	}
}
