package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Executor carries out one teardown; an error is retried.
type Executor func(ctx context.Context, t Teardown) error

// Pool runs teardowns with a bounded number of workers, never two for one pull request at once,
// retrying failures with exponential backoff and jitter. With a Journal, a teardown is recorded
// before it starts and until it has ended well; what Close has to leave (queued, or cut short)
// stays recorded, and Resume (the next run's, or the next sweep's) queues it again.
type Pool struct {
	exec    Executor
	workers int
	log     *slog.Logger
	// Attempts bounds the tries of one teardown (default 8); Base and Max shape the backoff
	// (default 1s doubling to at most 5m, each wait jittered to between half and all of it).
	Attempts  int
	Base, Max time.Duration
	Sleep     func(ctx context.Context, d time.Duration) error
	// Journal, when set (before the first Enqueue), keeps what is started or left.
	Journal Journal

	mu      sync.Mutex
	ready   []Teardown          // waiting for a worker, oldest first
	pending map[string]Teardown // per key, one more after the one running
	running map[string]bool
	closed  bool
	cut     []Teardown // cancelled by Close while running: left recorded
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

// run tries t until it succeeds, its attempts run out or Close cancels it. Each attempt first
// records t in the journal: nothing is removed before the record is there.
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
		err := p.record(p.ctx, t)
		if err == nil {
			err = p.exec(p.ctx, t)
		}
		if err == nil {
			p.log.Info("teardown done", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempt", i, "took", time.Since(start).String())
			p.forget(t)
			return
		}
		if p.ctx.Err() != nil {
			p.mu.Lock()
			p.cut = append(p.cut, t)
			p.mu.Unlock()
			p.log.Warn("teardown cut short by shutdown; its record stays for the next run", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempt", i, "error", err.Error())
			return
		}
		if i >= attempts {
			again := "the reaper's next sweep removes what is left on the cluster"
			if p.Journal != nil {
				again = "its record stays: the next sweep queues it again"
			}
			p.log.Error("teardown failed; "+again, "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempts", i, "error", err.Error())
			return
		}
		d := wait/2 + rand.N(wait/2+1)
		p.log.Warn("teardown failed, retrying", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "attempt", i, "in", d.String(), "error", err.Error())
		if err := p.sleep(d); err != nil {
			p.mu.Lock()
			p.cut = append(p.cut, t)
			p.mu.Unlock()
			return
		}
		if wait *= 2; wait > max {
			wait = max
		}
	}
}

// record writes t to the journal under its key.
func (p *Pool) record(ctx context.Context, t Teardown) error {
	if p.Journal == nil {
		return nil
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := p.Journal.Put(ctx, key(t), b); err != nil {
		return fmt.Errorf("recording the teardown before it starts: %w", err)
	}
	return nil
}

// forget deletes t's record once it has ended well. A record that stays costs one more
// teardown that finds nothing to do.
func (p *Pool) forget(t Teardown) {
	if p.Journal == nil {
		return
	}
	if err := p.Journal.Delete(p.ctx, key(t)); err != nil {
		p.log.Warn("the teardown's record could not be deleted; the next sweep runs it once more", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "error", err.Error())
	}
}

// Resume queues every recorded teardown that is not already queued or running: those an
// earlier run started or left, and those that ran out of attempts. It returns how many.
func (p *Pool) Resume(ctx context.Context) (int, error) {
	if p.Journal == nil {
		return 0, nil
	}
	recs, err := p.Journal.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the teardown journal: %w", err)
	}
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, ErrClosed
	}
	n := 0
	for _, k := range keys {
		var t Teardown
		if err := json.Unmarshal(recs[k], &t); err != nil || key(t) != k {
			p.log.Warn("a teardown record that does not read as one; deleting it", "delivery", "", "record", k)
			_ = p.Journal.Delete(ctx, k)
			continue
		}
		if p.busy(k) {
			continue
		}
		p.ready = append(p.ready, t)
		n++
		p.log.Info("teardown resumed from its record", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "namespace", t.Namespace)
	}
	if n > 0 {
		p.signal()
	}
	return n, nil
}

// busy says whether a teardown of key k is queued, waiting or running (p.mu held).
func (p *Pool) busy(k string) bool {
	if p.running[k] {
		return true
	}
	if _, ok := p.pending[k]; ok {
		return true
	}
	for _, r := range p.ready {
		if key(r) == k {
			return true
		}
	}
	return false
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
// cancels what is still running and returns how many teardowns were left undone: those queued
// (recorded now, with a journal) and those cut short (recorded since they started).
func (p *Pool) Close(ctx context.Context) int {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.signal()
	for {
		p.mu.Lock()
		idle := len(p.ready) == 0 && len(p.pending) == 0 && len(p.running) == 0
		p.mu.Unlock()
		if idle || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	// One per pull request: a later delivery for one cut short is folded into it.
	var left []Teardown
	at := map[string]int{}
	add := func(t Teardown) {
		if i, ok := at[key(t)]; ok {
			left[i] = merge(left[i], t)
			return
		}
		at[key(t)] = len(left)
		left = append(left, t)
	}
	for _, t := range p.cut {
		add(t)
	}
	for _, t := range p.ready {
		add(t)
	}
	for _, t := range p.pending {
		add(t)
	}
	// The records are written with a context of their own: ctx has ended by now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, t := range left {
		switch err := p.record(rctx, t); {
		case p.Journal == nil:
			p.log.Warn("teardown left at shutdown, not recorded (no journal); the reaper removes its namespace, its comment stays as it was", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
		case err != nil:
			p.log.Error("teardown left at shutdown and its record could not be written; the reaper removes its namespace, its comment may stay as it was", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "error", err.Error())
		default:
			p.log.Warn("teardown left at shutdown, recorded: the next run resumes it", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
		}
	}
	return len(left)
}
