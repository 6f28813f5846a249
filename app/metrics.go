package app

// The App's metrics, on a registry of its own (no global state), in Prometheus text format.

import (
	"maps"
	"slices"
	"strings"
	"sync"
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
	ops        // the operator's metrics, registered by registerOps (below)
}

// NewMetrics registers the App's metrics; depth and remaining are read at each scrape.
func NewMetrics(depth func() int, remaining func() int) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_deliveries_total",
			Help: "Webhook deliveries by event, action and result (queued, duplicate, ignored, acknowledged, bad-signature, bad-request, busy: refused with 503, no slot free)."},
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
	m.registerOps()
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
	if s != nil && err == nil && s.Live != nil {
		m.Environments(s.Live, s.Oldest)
		m.envs.setWatches(s.Watches)
	}
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

// ops are the metrics an operator runs the App by: the webhook's load, its dependencies,
// work that failed or ended in a dead letter, the journal's backlog and live environments.
type ops struct {
	inFlight   prometheus.Gauge
	dependency *prometheus.GaugeVec
	dead       *prometheus.CounterVec
	failures   *prometheus.CounterVec
	journalMu  sync.Mutex
	backlog    func() int
	oldest     func() time.Duration
	envs       *environments
}

func (m *Metrics) registerOps() {
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "af_app_webhook_in_flight",
		Help: "Webhook requests holding one of the in-flight slots (their bodies being read or handled)."})
	m.dependency = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "af_app_dependency_up",
		Help: "1 when the last check of a dependency (github: the App's credentials mint a token; cluster: the API server answers) succeeded, 0 when it failed."},
		[]string{"dependency"})
	m.dead = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_teardowns_dead_total",
		Help: "Teardowns given up for good (dead letters), by reason."}, []string{"reason"})
	m.failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "af_app_teardown_failures_total",
		Help: "Failed teardown attempts by reason (github, cluster, installation, permanent)."}, []string{"reason"})
	m.envs = &environments{
		count: prometheus.NewDesc("af_app_environments", "Live environments by repository, as of the last sweep.", []string{"repository"}, nil),
		age:   prometheus.NewDesc("af_app_environment_oldest_seconds", "Age of the oldest live environment by repository, as of the last sweep.", []string{"repository"}, nil),
		containment: prometheus.NewDesc("af_app_environment_containment",
			"1 for each live environment, labelled with its containment as its probe last saw it, as of the last sweep: contained, escaped (a route got out), no-answer, stale (no recent check), stopped (the probe's pod ended), absent (no watch), starting, unread (the cluster could not be asked). Alert on state!=\"contained\".",
			[]string{"namespace", "repository", "state"}, nil),
	}
	m.Registry.MustRegister(m.inFlight, m.dependency, m.dead, m.failures, m.envs,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "af_app_journal_records", Help: "Records in the durable journal (teardowns not yet done, or not yet told to GitHub)."},
			func() float64 {
				m.journalMu.Lock()
				f := m.backlog
				m.journalMu.Unlock()
				if f == nil {
					return 0
				}
				return float64(f())
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "af_app_journal_oldest_record_seconds", Help: "Age of the journal's oldest record (0 when it is empty)."},
			func() float64 {
				m.journalMu.Lock()
				f := m.oldest
				m.journalMu.Unlock()
				if f == nil {
					return 0
				}
				return f().Seconds()
			}),
	)
}

// DeadLetter counts one teardown given up for good, by reason (af_app_teardowns_dead_total).
func (m *Metrics) DeadLetter(reason string) {
	m.dead.WithLabelValues(reason).Inc()
}

// Failure counts one failed teardown attempt by reason, a short word such as github, cluster,
// installation or permanent (af_app_teardown_failures_total).
func (m *Metrics) Failure(reason string) {
	m.failures.WithLabelValues(reason).Inc()
}

// JournalFuncs sets what af_app_journal_records and af_app_journal_oldest_record_seconds read
// at each scrape: the number of records in the journal and the age of the oldest one. A later
// call replaces the functions; nil reads as 0.
func (m *Metrics) JournalFuncs(backlog func() int, oldest func() time.Duration) {
	m.journalMu.Lock()
	defer m.journalMu.Unlock()
	m.backlog, m.oldest = backlog, oldest
}

// Environments sets the live environments by repository (af_app_environments) and the age of
// each repository's oldest (af_app_environment_oldest_seconds). Each call replaces the whole
// set: a repository absent from byRepo is no longer exported.
func (m *Metrics) Environments(byRepo map[string]int, oldest map[string]time.Duration) {
	m.envs.set(byRepo, oldest)
}

// DependencyUp sets af_app_dependency_up for dependency (github or cluster).
func (m *Metrics) DependencyUp(dependency string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.dependency.WithLabelValues(dependency).Set(v)
}

// environments is a collector of the last Environments call, exported as one consistent set.
type environments struct {
	count, age  *prometheus.Desc
	containment *prometheus.Desc
	mu          sync.Mutex
	byRepo      map[string]int
	oldest      map[string]time.Duration
	watches     []EnvWatch
}

func (e *environments) setWatches(w []EnvWatch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watches = slices.Clone(w)
}

func (e *environments) set(byRepo map[string]int, oldest map[string]time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byRepo, e.oldest = maps.Clone(byRepo), maps.Clone(oldest)
}

func (e *environments) Describe(ch chan<- *prometheus.Desc) {
	ch <- e.count
	ch <- e.age
	ch <- e.containment
}

func (e *environments) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for repo, n := range e.byRepo {
		ch <- prometheus.MustNewConstMetric(e.count, prometheus.GaugeValue, float64(n), repo)
	}
	for repo, d := range e.oldest {
		ch <- prometheus.MustNewConstMetric(e.age, prometheus.GaugeValue, d.Seconds(), repo)
	}
	for _, w := range e.watches {
		ch <- prometheus.MustNewConstMetric(e.containment, prometheus.GaugeValue, 1, w.Namespace, w.Repository, w.State)
	}
}
