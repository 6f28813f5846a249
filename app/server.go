package app

// The App's server: POST /webhook, /healthz, /readyz and /metrics on one listener; the
// teardown pool; the reaper every interval and once at start, each sweep first resuming the
// journal's teardowns (a previous run's, and those that ran out of attempts); graceful shutdown
// that stops taking deliveries, lets in-flight teardowns finish within a grace period and
// records what it had to leave for the next run.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config configures the App.
type Config struct {
	// Secret is the App's webhook secret; the App refuses to start without one.
	Secret  []byte
	Cluster Cluster
	GitHub  *GitHub
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
}

// Server is a configured App.
type Server struct {
	cfg     Config
	log     *slog.Logger
	Pool    *Pool
	Metrics *Metrics
	Reaper  *Reaper
	webhook *Webhook
	mux     *http.ServeMux

	readyMu sync.Mutex
	readyAt time.Time
	readyOK error
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
	s.Pool.Attempts, s.Pool.Base, s.Pool.Max = cfg.Attempts, cfg.Base, cfg.Max
	if cfg.Journal == nil {
		cfg.Journal = &MemoryJournal{}
		s.cfg.Journal = cfg.Journal
	}
	s.Pool.Journal = cfg.Journal
	s.Metrics = NewMetrics(s.Pool.Depth, remaining)
	x.Observe = s.Metrics.Teardown
	wh.queue = s.Pool
	wh.Observe = s.Metrics.Delivery
	s.webhook = wh
	s.Reaper = &Reaper{Cluster: cfg.Cluster, Queue: s.Pool, Log: log, Observe: s.Metrics.Sweep}
	if cfg.GitHub != nil {
		s.Reaper.GitHub = cfg.GitHub
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", wh)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{}))
	s.mux = mux
	return s, nil
}

// Handler is the App's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// ready answers /readyz: the cluster answers and the App's credentials mint a token. A
// success is remembered for 30 seconds, so probes do not spend GitHub's rate limit.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	if s.readyAt.IsZero() || s.readyOK != nil || time.Since(s.readyAt) > 30*time.Second {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		s.readyOK = s.cfg.Cluster.Reachable(ctx)
		if s.readyOK == nil && s.cfg.GitHub != nil {
			s.readyOK = s.cfg.GitHub.Check(ctx)
		}
		s.readyAt = time.Now()
	}
	if s.readyOK != nil {
		http.Error(w, "not ready: "+s.readyOK.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// Run serves on ln until ctx ends, sweeping every interval, then shuts down gracefully.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.With("delivery", "").Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("af app serving", "delivery", "", "addr", ln.Addr().String(), "workers", s.cfg.Workers, "reap_interval", s.cfg.ReapInterval.String())
	sweepDone := make(chan struct{})
	sweepCtx, stopSweeps := context.WithCancel(ctx)
	go func() {
		defer close(sweepDone)
		t := time.NewTicker(s.cfg.ReapInterval)
		defer t.Stop()
		for {
			if n, err := s.Pool.Resume(sweepCtx); err != nil {
				if sweepCtx.Err() == nil {
					s.log.Error("could not resume the recorded teardowns; the next sweep tries again", "delivery", "reaper", "error", err.Error())
				}
			} else if n > 0 {
				s.log.Info("resumed recorded teardowns", "delivery", "reaper", "resumed", n)
			}
			if sw, err := s.Reaper.Sweep(sweepCtx); err != nil {
				if sweepCtx.Err() == nil {
					s.log.Error("sweep failed", "delivery", "reaper", "error", err.Error())
				}
			} else {
				s.log.Info("sweep", "delivery", "reaper", "checked", sw.Checked, "removals", len(sw.Removals), "errors", len(sw.Errors))
			}
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	stopSweeps()
	<-sweepDone
	s.log.Info("shutting down: no new deliveries; in-flight teardowns get the grace period", "delivery", "", "grace", s.cfg.Grace.String())
	shutCtx, cancel := context.WithTimeout(context.Background(), s.cfg.Grace)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	left := s.Pool.Close(shutCtx)
	if left > 0 {
		s.log.Warn("teardowns left at shutdown; the next run resumes those recorded", "delivery", "", "left", left)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// Close stops the workers (for a Server used through Handler without Run).
func (s *Server) Close(ctx context.Context) int { return s.Pool.Close(ctx) }
