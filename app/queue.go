package app

import (
	"context"
	"errors"
	"fmt"
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
	// MaxAge bounds a teardown's life (default 7 days): one recorded longer ago than that is
	// dead-lettered, and a dead-lettered record is deleted MaxAge after it died.
	MaxAge time.Duration
	// OnDead, when set, is told of each teardown dead-lettered (metrics); OnFailure of each
	// failed attempt, by FailureReason.
	OnDead    func(t Teardown)
	OnFailure func(reason string)
	// Now is the clock (tests).
	Now func() time.Time

	mu      sync.Mutex
	ready   []Teardown          // waiting for a worker, oldest first
	pending map[string]Teardown // per key, one more after the one running
	running map[string]bool
	stop    map[string]bool // running teardowns cancelled: no further attempt
	closed  bool
	cut     []Teardown // cancelled by Close while running: left recorded
	backlog struct {   // the journal as the last Resume read it
		records int
		oldest  time.Time
	}
	wake   chan struct{}
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
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
	p := &Pool{exec: exec, workers: workers, log: log, pending: map[string]Teardown{}, running: map[string]bool{}, stop: map[string]bool{},
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
	if !b.Recorded.IsZero() && (a.Recorded.IsZero() || b.Recorded.Before(a.Recorded)) {
		a.Recorded = b.Recorded
	}
	return a
}

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = errors.New("the teardown pool is shutting down")

// Enqueue queues t. A teardown for a pull request already waiting is merged into it (teardown
// is idempotent); one for a pull request being torn down waits until that one ends.
func (p *Pool) Enqueue(t Teardown) error {
	if t.Recorded.IsZero() {
		t.Recorded = p.now()
	}
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

// Cancel drops the waiting teardown of the pull request (queued, or waiting behind a running
// one) and returns whether there was one; one retrying makes no further attempt. An attempt
// under way is not interrupted: it read the pull request's state before it removed anything.
func (p *Pool) Cancel(repository string, pullRequest int) bool {
	k := key(Teardown{Repository: repository, PullRequest: pullRequest})
	p.mu.Lock()
	defer p.mu.Unlock()
	_, dropped := p.pending[k]
	delete(p.pending, k)
	if p.running[k] {
		p.stop[k], dropped = true, true
	}
	for i, r := range p.ready {
		if key(r) == k {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			dropped = true
			break
		}
	}
	if dropped {
		p.log.Info("teardown cancelled: the pull request was reopened", "delivery", "", "repository", repository, "pull_request", pullRequest)
	}
	return dropped
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
		delete(p.stop, k)
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
		if p.stopped(t) {
			p.log.Info("teardown stopped before its next attempt: the pull request was reopened", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest)
			return
		}
		if age := p.now().Sub(t.Recorded); !t.Recorded.IsZero() && age > p.maxAge() {
			p.deadLetter(t, "max-age", fmt.Errorf("asked for %s ago, more than the %s a teardown may take", age.Round(time.Second), p.maxAge()))
			return
		}
		start := time.Now()
		err := p.Record(p.ctx, t)
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
		if p.OnFailure != nil {
			p.OnFailure(FailureReason(err))
		}
		var pe *PermanentError
		if errors.As(err, &pe) {
			p.deadLetter(t, pe.Reason, err)
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

// deadLetter ends t for good: its record is kept, marked dead, for the operator to see (it is
// never run again, and deleted MaxAge later), and one log line names the pull request and why.
func (p *Pool) deadLetter(t Teardown, reason string, err error) {
	t.Dead, t.DeadAt = reason, p.now()
	p.log.Error("teardown dead-lettered: it will not be tried again", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest,
		"namespace", t.Namespace, "reason", reason, "error", err.Error())
	if p.Journal != nil {
		if err := p.Record(p.ctx, t); err != nil {
			p.log.Warn("the dead-lettered teardown's record could not be written", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "error", err.Error())
		}
	}
	if p.OnDead != nil {
		p.OnDead(t)
	}
}

// stopped says whether t was cancelled while running, and forgets it.
func (p *Pool) stopped(t Teardown) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(t)
	if !p.stop[k] {
		return false
	}
	delete(p.stop, k)
	return true
}

func (p *Pool) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Pool) maxAge() time.Duration {
	if p.MaxAge > 0 {
		return p.MaxAge
	}
	return 7 * 24 * time.Hour
}
