package app

// The App's server: POST /webhook on one listener, behind the in-flight limit (limit.go), and
// /healthz, /readyz and /metrics on another, or on the same when Config.Manage is nil
// (manage.go); the
// teardown pool; the reaper every interval and once at start, each sweep first resuming the
// journal's teardowns (a previous run's, and those that ran out of attempts); graceful shutdown
// that stops taking deliveries, lets in-flight teardowns finish within a grace period and
// records what it had to leave for the next run.

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/appclient"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures the App.
type Config struct {
	// Secret is the App's webhook secret; the App refuses to start without one.
	Secret  []byte
	Cluster Cluster
	GitHub  *appclient.Clients
	// Workers bounds the teardowns run at once (default 4).
	Workers int
	// ReapInterval is the time between sweeps (default 10m); a lost webhook costs at most it.
	ReapInterval time.Duration
	// Grace is how long shutdown waits for in-flight teardowns (default 25s: within a pod's
	// default 30s termination grace period).
	Grace time.Duration
	Log   *slog.Logger
	// Backoff of the pool (zero: the pool's defaults).
	Attempts  int
	Base, Max time.Duration
	// Journal keeps teardowns from their start until GitHub was told, and what shutdown left;
	// nil keeps them in memory (lost with the process: the reaper still removes the namespaces,
	// but a comment whose namespace was already gone stays as it was).
	Journal Journal
	// Hook is the teardowner's (tests).
	Hook func(namespace string, start bool)
	// Manage, when set, is the listener Run serves the management routes on (ManageHandler:
	// /healthz, /readyz, /metrics); nil serves them on the webhook's listener too.
	Manage net.Listener
	// MaxInFlight bounds the webhook requests handled at once, each body up to MaxBody
	// (default 4: 100 MB of bodies); InFlightWait is how long a request waits for a slot
	// before it is answered 503 (default 10s, bounded by its own context).
	MaxInFlight  int
	InFlightWait time.Duration
	// Lead, when set, runs run while this replica holds the leadership (a Lease), and returns
	// when ctx ends or the leadership is lost. Every replica takes deliveries in (the intake
	// records them); only the leader runs teardowns and sweeps. Without Lead this replica
	// always leads (one replica, or tests).
	Lead func(ctx context.Context, run func(ctx context.Context)) error
	// ResumeInterval is how often the leader reads the journal for teardowns other replicas
	// took in (default 5s): the most a delivery to a follower waits before its teardown starts.
	ResumeInterval time.Duration
	// MaxAge bounds a teardown's life before it is dead-lettered (default 7 days; the pool's).
	MaxAge time.Duration
}

// Server is a configured App.
type Server struct {
	cfg     Config
	log     *slog.Logger
	Pool    *Pool
	Metrics *Metrics
	Reaper  *Reaper
	webhook *Webhook
	intake  *Intake
	// isLeader says whether this replica leads now (metrics, tests).
	isLeader atomic.Bool
	mux      *http.ServeMux

	manage *http.ServeMux // ManageHandler's routes (manage.go)
	limit  *limiter       // the webhook's in-flight limit (limit.go)
	readyz readiness      // /readyz's last answer (manage.go)
}

// New checks cfg and returns the App, its workers started. Close (or Run's end) stops them.
func New(cfg Config) (*Server, error) {
	if cfg.Cluster == nil {
		return nil, errors.New("app: no cluster")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 10 * time.Minute
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 25 * time.Second
	}
	if cfg.ResumeInterval <= 0 {
		cfg.ResumeInterval = 5 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: log}
	x := &Teardowner{Cluster: cfg.Cluster, Log: log, Hook: cfg.Hook}
	var remaining func() int = func() int { return -1 }
	if cfg.GitHub != nil {
		x.GitHub = cfg.GitHub
		remaining = cfg.GitHub.Stats.RateRemaining
	}
	wh, err := NewWebhook(cfg.Secret, nil, log) // the queue is set below, once it exists
	if err != nil {
		return nil, err
	}
	s.Pool = NewPool(cfg.Workers, x.Run, log)
	s.Pool.Attempts, s.Pool.Base, s.Pool.Max, s.Pool.MaxAge = cfg.Attempts, cfg.Base, cfg.Max, cfg.MaxAge
	if cfg.Journal == nil {
		cfg.Journal = &MemoryJournal{}
		s.cfg.Journal = cfg.Journal
	}
	s.Pool.Journal = cfg.Journal
	s.Metrics = NewMetrics(s.Pool.Depth, remaining)
	x.Observe = s.Metrics.Teardown
	s.Pool.OnDead = func(t Teardown) { s.Metrics.DeadLetter(t.Dead) }
	s.Pool.OnFailure = s.Metrics.Failure
	s.Metrics.JournalFuncs(func() int { n, _ := s.Pool.Backlog(); return n }, func() time.Duration { _, d := s.Pool.Backlog(); return d })
	s.Metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "af_app_leader",
		Help: "1 while this replica leads (runs the teardowns and the sweeps), else 0."},
		func() float64 {
			if s.isLeader.Load() {
				return 1
			}
			return 0
		}))
	s.intake = NewIntake(s.Pool)
	if cfg.Lead == nil {
		s.intake.Lead(true) // the only replica: its pool runs what it takes in, with or without Run
	}
	wh.queue = s.intake
	wh.Observe = s.Metrics.Delivery
	s.webhook = wh
	s.Reaper = &Reaper{Cluster: cfg.Cluster, Queue: s.Pool, Log: log, Observe: s.Metrics.Sweep}
	if cfg.GitHub != nil {
		s.Reaper.GitHub = cfg.GitHub
		s.Reaper.Report = ContainmentCheck{GitHub: cfg.GitHub}
	}
	s.mux, s.manage = s.routes(wh)
	return s, nil
}

// Handler is the App's public HTTP handler: POST /webhook, behind the in-flight limit. The
// management routes are ManageHandler's.
func (s *Server) Handler() http.Handler { return s.mux }

// Run serves on ln until ctx ends, sweeping every interval, then shuts down gracefully.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.publicHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.With("delivery", "").Handler(), slog.LevelWarn)}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	msrv := s.serveManage(errc) // nil without Config.Manage
	s.log.Info("af app serving", "delivery", "", "addr", ln.Addr().String(), "workers", s.cfg.Workers, "reap_interval", s.cfg.ReapInterval.String())
	leadCtx, stopLeading := context.WithCancel(ctx)
	leadDone := make(chan error, 1)
	go func() { leadDone <- s.lead(leadCtx) }()
	stopDeps := s.watchDependencies(ctx) // GitHub's and the cluster's health: metrics and logs
	var serveErr, lost error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	case lost = <-leadDone:
		leadDone <- lost
	}
	stopLeading()
	if err := <-leadDone; err != nil && lost == nil && ctx.Err() == nil {
		lost = err
	}
	grace := s.cfg.Grace
	if lost != nil {
		// Another replica leads now, or will: what runs here is cut short at once (it stays
		// recorded), so two replicas do not work on one teardown for longer than they must.
		s.log.Error("no longer the leader: stopping; the pod restarts as a follower", "delivery", "", "error", lost.Error())
		grace = 0
	}
	s.log.Info("shutting down: no new deliveries; in-flight teardowns get the grace period", "delivery", "", "grace", s.cfg.Grace.String())
	shutCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if msrv != nil {
		_ = msrv.Shutdown(shutCtx)
	}
	stopDeps()
	left := s.Pool.Close(shutCtx)
	if left > 0 {
		s.log.Warn("teardowns left at shutdown; the next run resumes those recorded", "delivery", "", "left", left)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	if lost != nil {
		return failure.New(failure.AppLeadershipLost, "the App lost its leadership lease", lost)
	}
	return nil
}

// lead runs the leader's work (teardowns, resumes, sweeps) while this replica leads: always
// without Config.Lead, else while Lead holds the lease. It returns nil when ctx ends, and an
// error when the leadership ended first.
func (s *Server) lead(ctx context.Context) error {
	lead := s.cfg.Lead
	if lead == nil {
		s.leading(ctx)
		return nil
	}
	err := lead(ctx, s.leading)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("the lease was lost")
	}
	return err
}

// leading is the leader's work until ctx ends: the journal resumed every ResumeInterval (the
// teardowns other replicas took in, and those left or retried), the reaper's sweep every
// ReapInterval and once at once.
func (s *Server) leading(ctx context.Context) {
	s.log.Info("leading: this replica runs the teardowns and the sweeps", "delivery", "")
	s.isLeader.Store(true)
	s.intake.Lead(true)
	defer func() {
		s.intake.Lead(false)
		s.isLeader.Store(false)
	}()
	resume := func() {
		if n, err := s.Pool.Resume(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Error("could not resume the recorded teardowns; trying again", "delivery", "reaper", "error", err.Error())
			}
		} else if n > 0 {
			s.log.Info("resumed recorded teardowns", "delivery", "reaper", "resumed", n)
		}
	}
	sweep := time.NewTicker(s.cfg.ReapInterval)
	defer sweep.Stop()
	resumes := time.NewTicker(s.cfg.ResumeInterval)
	defer resumes.Stop()
	for first := true; ; first = false {
		resume()
		if first {
			s.sweep(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-resumes.C:
		case <-sweep.C:
			resume()
			s.sweep(ctx)
		}
	}
}

// sweep runs the reaper once and gives the metrics what it saw.
func (s *Server) sweep(ctx context.Context) {
	sw, err := s.Reaper.Sweep(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("sweep failed", "delivery", "reaper", "error", err.Error())
		}
		return
	}
	s.log.Info("sweep", "delivery", "reaper", "checked", sw.Checked, "removals", len(sw.Removals), "errors", len(sw.Errors))
}

// Close stops the workers (for a Server used through Handler without Run).
func (s *Server) Close(ctx context.Context) int { return s.Pool.Close(ctx) }
