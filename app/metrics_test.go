package app

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

// The operator's metrics, read as a scrape reads them: dead letters and failures by reason,
// the journal's backlog and oldest record (0 until real functions are given), and live
// environments by repository, a repository whose last environment went no longer exported.
func TestMetricsForOperators(t *testing.T) {
	srv, err := New(Config{Secret: secret, Cluster: newMemCluster(), ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	m := srv.Metrics
	scrape := func() string { return get(srv.ManageHandler(), "/metrics").Body.String() }

	for _, want := range []string{"af_app_journal_records 0\n", "af_app_journal_oldest_record_seconds 0\n", "af_app_webhook_in_flight 0\n"} {
		if !strings.Contains(scrape(), want) {
			t.Errorf("at start /metrics lacks %q", want)
		}
	}

	m.DeadLetter("installation")
	m.DeadLetter("installation")
	m.DeadLetter("repository")
	m.Failure("github")
	m.Failure("cluster")
	m.Failure("cluster")
	backlog := 3
	m.JournalFuncs(func() int { return backlog }, func() time.Duration { return 90 * time.Second })
	m.Environments(map[string]int{"acme/shop": 2, "acme/api": 1},
		map[string]time.Duration{"acme/shop": 2 * time.Hour, "acme/api": 5 * time.Minute})
	backlog = 4 // read at the scrape, not when given
	got := scrape()
	for _, w := range []string{
		`af_app_teardowns_dead_total{reason="installation"} 2`,
		`af_app_teardowns_dead_total{reason="repository"} 1`,
		`af_app_teardown_failures_total{reason="github"} 1`,
		`af_app_teardown_failures_total{reason="cluster"} 2`,
		"af_app_journal_records 4\n",
		"af_app_journal_oldest_record_seconds 90\n",
		`af_app_environments{repository="acme/shop"} 2`,
		`af_app_environments{repository="acme/api"} 1`,
		`af_app_environment_oldest_seconds{repository="acme/shop"} 7200`,
		`af_app_environment_oldest_seconds{repository="acme/api"} 300`,
		"# HELP af_app_teardowns_dead_total", "# HELP af_app_teardown_failures_total", "# TYPE af_app_environments gauge",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("/metrics lacks %q:\n%s", w, grep(got, "af_app_"))
		}
	}

	// The next sweep: acme/api's environment went, acme/shop has one left.
	m.Environments(map[string]int{"acme/shop": 1}, map[string]time.Duration{"acme/shop": 30 * time.Minute})
	got = scrape()
	for _, w := range []string{`af_app_environments{repository="acme/shop"} 1`, `af_app_environment_oldest_seconds{repository="acme/shop"} 1800`} {
		if !strings.Contains(got, w) {
			t.Errorf("after the second sweep /metrics lacks %q", w)
		}
	}
	if strings.Contains(got, `repository="acme/api"`) {
		t.Errorf("a repository without environments is still exported:\n%s", grep(got, "acme/api"))
	}
	// No environments at all: neither family has a series.
	m.Environments(nil, nil)
	if got := scrape(); strings.Contains(got, "af_app_environments{") || strings.Contains(got, "af_app_environment_oldest_seconds{") {
		t.Errorf("environments exported after an empty sweep:\n%s", grep(got, "environment"))
	}
}

// A sweep reads every environment's watch: an escaped one is logged as an error with its
// routes, one nothing can speak for (absent, the cluster not answering) as a warning, and the
// scrape carries each environment's state, replaced at the next sweep.
func TestSweepReadsWatches(t *testing.T) {
	c := newMemCluster(prEnv(1), prEnv(2), prEnv(3))
	c.watches = map[string]*afruntime.Watch{
		"af-env-shop-pr-1": {State: gate.Contained, Detail: "contained: every route denied"},
		"af-env-shop-pr-2": {State: gate.Escape, Detail: "NOT CONTAINED: at T the probe got out by node-local (10.0.0.1:10250)"},
	}
	var logs strings.Builder
	srv, err := New(Config{Secret: secret, Cluster: c, ReapInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	r := &Reaper{Cluster: c, DryRun: true, Log: slog.New(slog.NewTextHandler(&logs, nil)), Observe: srv.Metrics.Sweep}
	sw, err := r.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range sw.Watches {
		states[w.Namespace] = w.State
	}
	if want := map[string]string{"af-env-shop-pr-1": "contained", "af-env-shop-pr-2": "escaped", "af-env-shop-pr-3": "absent"}; !maps.Equal(states, want) {
		t.Fatalf("watches %v, want %v", states, want)
	}
	for _, want := range []string{
		`level=ERROR msg="an environment is no longer contained"`, `namespace=af-env-shop-pr-2`, `node-local (10.0.0.1:10250)`,
		`level=WARN msg="an environment's containment is not known"`, `namespace=af-env-shop-pr-3`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the sweep's log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "namespace=af-env-shop-pr-1 ") {
		t.Errorf("a contained environment was logged:\n%s", logs.String())
	}
	scrape := func() string { return get(srv.ManageHandler(), "/metrics").Body.String() }
	got := scrape()
	for _, w := range []string{
		`af_app_environment_containment{namespace="af-env-shop-pr-1",repository="` + testRepo + `",state="contained"} 1`,
		`af_app_environment_containment{namespace="af-env-shop-pr-2",repository="` + testRepo + `",state="escaped"} 1`,
		`af_app_environment_containment{namespace="af-env-shop-pr-3",repository="` + testRepo + `",state="absent"} 1`,
	} {
		if !strings.Contains(got, w) {
			t.Errorf("/metrics lacks %q:\n%s", w, grep(got, "containment"))
		}
	}
	// The enforcer is back: the next sweep replaces the set.
	c.watches["af-env-shop-pr-2"] = &afruntime.Watch{State: gate.Contained, Detail: "contained"}
	if _, err := r.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := scrape(); strings.Contains(got, `state="escaped"`) || !strings.Contains(got, `namespace="af-env-shop-pr-2",repository="`+testRepo+`",state="contained"} 1`) {
		t.Errorf("after the second sweep:\n%s", grep(got, "containment"))
	}
}
