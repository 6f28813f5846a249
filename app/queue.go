package app

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Executor carries out one teardown; an error is retried.
type Executor func(ctx context.Context, t Teardown) error

// Pool runs teardowns with a bounded number of workers, never two for one pull request at once,
// retrying failures with exponential backoff and jitter. Work lives in memory: what is queued
// when the App stops is logged as dropped, and the reaper's next sweep removes it.
type Pool struct {
	exec    Executor
	workers int
	log     *slog.Logger
	// Attempts bounds the tries of one teardown (default 8); Base and Max shape the backoff
	// (default 1s doubling to at most 5m, each wait jittered to between half and all of it).
	Attempts  int
	Base, Max time.Duration
	Sleep     func(ctx context.Context, d time.Duration) error

	mu      sync.Mutex
	ready   []Teardown          // waiting for a worker, oldest first
	pending map[string]Teardown // per key, one more after the one running
	running map[string]bool
	closed  bool
	wake    chan struct{}
	wg      sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

// NewPool starts workers workers running exec.
func NewPool(workers int, exec Executor, log *slog.Logger) *Pool {
	if workers < 1 {
		workers = 1
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool{exec: exec, workers: workers, log: log, pending: map[string]Teardown{}, running: map[string]bool{},
		wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
	for i := 0; i < workers; i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

// key is what teardowns are serialised on: the pull request (all its environments), or for a
// manual environment its namespace.
func key(t Teardown) string {
	if t.PullRequest == 0 && t.Namespace != "" {
		return "namespace " + t.Namespace
	}
	return strings.ToLower(t.Repository) + "#" + strconv.Itoa(t.PullRequest)
}

// merge folds teardown b into a waiting teardown a of the same key: one of a single namespace
// widens to all of the pull request's when the other asks for them all.
func merge(a, b Teardown) Teardown {
	if a.Namespace != b.Namespace {
		a.Namespace = ""
	}
	if a.InstallationID == 0 {
		a.InstallationID = b.InstallationID
	}
	return a
}

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = errors.New("the teardown pool is shutting down")

// Enqueue queues t. A teardown for a pull request already waiting is merged into it (teardown
// is idempotent); one for a pull request being torn down waits until that one ends.
func (p *Pool) Enqueue(t Teardown) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	k := key(t)
	if p.running[k] {
		if w, ok := p.pending[k]; ok {
			t = merge(w, t)
		}
		p.pending[k] = t
		return nil
	}
	for i, r := range p.ready {
		if key(r) == k {
			p.ready[i] = merge(r, t)
			return nil
		}
	}
	p.ready = append(p.ready, t)
	p.signal()
	return nil
}

// Depth is how many teardowns wait (not counting those running).
func (p *Pool) Depth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready) + len(p.pending)
}

func (p *Pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Pool) next() (Teardown, bool) {
	for {
		if p.ctx.Err() != nil {
			return Teardown{}, false // cancelled by Close: what waits stays, counted as left
		}
		p.mu.Lock()
		for i, t := range p.ready {
			k := key(t)
			if p.running[k] {
				continue
			}
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			p.running[k] = true
			if len(p.ready) > 0 {
				p.signal()
			}
			p.mu.Unlock()
			return t, true
		}
		closed := p.closed
		p.mu.Unlock()
		if closed {
			return Teardown{}, false
		}
		select {
		case <-p.wake:
		case <-p.ctx.Done():
			return Teardown{}, false
		}
	}
}

func (p *Pool) work() {
	defer p.wg.Done()
	for {
		t, ok := p.next()
		if !ok {
			return
		}
		p.run(t)
		p.mu.Lock()
		k := key(t)
		delete(p.running, k)
		if more, ok := p.pending[k]; ok {
			delete(p.pending, k)
			p.ready = append(p.ready, more)
		}
		p.signal()
		p.mu.Unlock()
	}
}

func (p *Pool) run(t Teardown) {
	attempts, base, max := p.Attempts, p.Base, p.Max
	if attempts <= 0 {
		attempts = 8
	}
	if base <= 0 {
		base = time.Second
	}
	if max <= 0 {
		max = 5 * time.Minute
	}
	wait := base
	for i := 1; ; i++ {
		start := time.Now()
		err := p.exec(p.ctx, t)
		if err == nil {
			p.log.Info("teardown done", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempt", i, "took", time.Since(start).String())
			return
		}
		if i >= attempts || p.ctx.Err() != nil {
			p.log.Error("teardown failed; the reaper's next sweep tries again", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempts", i, "error", err.Error())
			return
		}
		d := wait/2 + rand.N(wait/2+1)
		p.log.Warn("teardown failed, retrying", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempt", i, "in", d.String(), "error", err.Error())
		if err := p.sleep(d); err != nil {
			return
		}
		if wait *= 2; wait > max {
			wait = max
		}
	}
}

func (p *Pool) sleep(d time.Duration) error {
	if p.Sleep != nil {
		return p.Sleep(p.ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.ctx.Done():
		return p.ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close stops taking work, lets the running and queued teardowns finish until ctx ends, then
// cancels what is still running and returns how many teardowns were left undone.
func (p *Pool) Close(ctx context.Context) int {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
	done := make(chan struct{})
	go func() {
		for {
			p.mu.Lock()
			idle := len(p.ready) == 0 && len(p.pending) == 0 && len(p.running) == 0
			p.mu.Unlock()
			if idle {
				break
			}
			select {
			case <-ctx.Done():
				p.cancel()
				p.wg.Wait()
				close(done)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		p.cancel()
		p.wg.Wait()
		close(done)
	}()
	<-done
	p.mu.Lock()
	defer p.mu.Unlock()
	left := len(p.ready) + len(p.pending)
	for _, t := range p.ready {
		p.log.Warn("teardown dropped at shutdown; the reaper removes it", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
	}
	return left
}
