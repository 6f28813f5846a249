package app

// The management endpoints, on a port of their own (Config.Manage; the webhook's when nil):
// GET /healthz, GET /readyz and GET /metrics. Readiness answers on what the App needs to accept
// a webhook and nothing else: the secret (loaded, or New would have refused) and the durable
// intake (the journal answers a read). It never asks GitHub or anything else of the cluster,
// so neither's outage takes the webhook out of its Service while deliveries keep coming;
// their health is checked in the background instead (every 30s), exported as
// af_app_dependency_up and logged when it changes.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// readyFor is how long a successful readiness check is remembered.
const readyFor = 10 * time.Second

// dependencyEvery is the time between two checks of GitHub and the cluster.
const dependencyEvery = 30 * time.Second

// readiness is /readyz's state: the last success, and whether the last check failed (for
// logging a change once).
type readiness struct {
	mu      sync.Mutex
	okAt    time.Time
	failing bool
}

// routes returns the webhook's mux (POST /webhook behind the in-flight limit) and the
// management mux.
func (s *Server) routes(wh http.Handler) (webhook, manage *http.ServeMux) {
	s.limit = newLimiter(s.cfg.MaxInFlight, s.cfg.InFlightWait)
	s.limit.gauge = s.Metrics.inFlight
	s.limit.busy = func() {
		s.Metrics.Delivery("", "", Busy)
		s.log.Warn("delivery refused: every in-flight slot stayed taken for the wait", "delivery", "", "result", Busy,
			"status", http.StatusServiceUnavailable, "max_in_flight", cap(s.limit.slots), "wait", s.limit.wait.String())
	}
	webhook = http.NewServeMux()
	webhook.Handle("POST /webhook", s.limit.wrap(wh))
	manage = http.NewServeMux()
	manage.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	manage.HandleFunc("GET /readyz", s.ready)
	manage.Handle("GET /metrics", promhttp.HandlerFor(s.Metrics.Registry, promhttp.HandlerOpts{}))
	return webhook, manage
}

// ManageHandler serves the management routes: GET /healthz, GET /readyz, GET /metrics. Run
// serves it on Config.Manage, or beside the webhook when that is nil.
func (s *Server) ManageHandler() http.Handler { return s.manage }

// SetManage gives the management routes a listener of their own (Config.Manage), for a
// caller that listens only once New accepted the configuration; call it before Run.
func (s *Server) SetManage(ln net.Listener) { s.cfg.Manage = ln }

// publicHandler is what Run serves on the webhook's listener: the webhook alone when the
// management routes have a listener of their own, else both.
func (s *Server) publicHandler() http.Handler {
	if s.cfg.Manage != nil {
		return s.mux
	}
	both := http.NewServeMux()
	both.Handle("/webhook", s.mux)
	both.Handle("/", s.manage)
	return both
}

// serveManage serves ManageHandler on Config.Manage, its end reported on errc; nil when there
// is no such listener.
func (s *Server) serveManage(errc chan<- error) *http.Server {
	if s.cfg.Manage == nil {
		return nil
	}
	srv := &http.Server{Handler: s.manage, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.With("delivery", "").Handler(), slog.LevelWarn)}
	go func() { errc <- srv.Serve(s.cfg.Manage) }()
	s.log.Info("af app management endpoints serving", "delivery", "", "addr", s.cfg.Manage.Addr().String())
	return srv
}

// ready answers /readyz: 200 when the journal, where deliveries are recorded before they are
// acknowledged, answers a read (remembered for readyFor); 503 saying why otherwise.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	s.readyz.mu.Lock()
	fresh := !s.readyz.okAt.IsZero() && time.Since(s.readyz.okAt) < readyFor
	s.readyz.mu.Unlock()
	if fresh {
		fmt.Fprintln(w, "ready")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	_, err := s.cfg.Journal.List(ctx)
	s.readyz.mu.Lock()
	changed := (err != nil) != s.readyz.failing
	s.readyz.failing = err != nil
	if err == nil {
		s.readyz.okAt = time.Now()
	}
	s.readyz.mu.Unlock()
	if err != nil {
		if changed {
			s.log.Warn("not ready: the journal cannot be read, so deliveries cannot be recorded", "delivery", "", "error", err.Error())
		}
		http.Error(w, "not ready: the journal (the durable intake) cannot be read: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if changed {
		s.log.Info("ready again: the journal answers", "delivery", "")
	}
	fmt.Fprintln(w, "ready")
}

// dependency is one thing the App's work needs but accepting a delivery does not.
type dependency struct {
	name  string
	check func(context.Context) error
}

func (s *Server) dependencies() []dependency {
	var out []dependency
	if s.cfg.GitHub != nil {
		out = append(out, dependency{"github", s.cfg.GitHub.Check})
	}
	return append(out, dependency{"cluster", s.cfg.Cluster.Reachable})
}

// watchDependencies checks GitHub and the cluster at once and every dependencyEvery until ctx
// ends or the returned stop is called; stop returns once the checks have stopped.
func (s *Server) watchDependencies(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[string]bool{}
		t := time.NewTicker(dependencyEvery)
		defer t.Stop()
		for {
			s.checkDependencies(ctx, last)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// checkDependencies checks each dependency once, sets af_app_dependency_up, and logs a line
// for each whose state differs from last (up: true) or that was never checked; last is updated.
func (s *Server) checkDependencies(ctx context.Context, last map[string]bool) {
	for _, d := range s.dependencies() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := d.check(cctx)
		cancel()
		if ctx.Err() != nil {
			return // shutting down: a check cut short says nothing
		}
		up := err == nil
		s.Metrics.DependencyUp(d.name, up)
		was, seen := last[d.name]
		last[d.name] = up
		switch {
		case seen && was == up:
		case up:
			s.log.Info("dependency up", "delivery", "", "dependency", d.name)
		default:
			s.log.Warn("dependency down: deliveries are still accepted; teardowns that need it fail and are retried", "delivery", "", "dependency", d.name, "error", err.Error())
		}
	}
}
