package app

// The teardown journal: each teardown is recorded before anything of it is removed and the
// record is deleted only once GitHub has been told; what shutdown has to leave is recorded too.
// A namespace already removed is invisible to the reaper, so for a teardown cut short between
// the namespace's removal and the comment's rewrite only this record says that work remains.
// The pool's Resume takes the records back into the queue: at start and before every sweep.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"
)

// Journal keeps records by key, surviving the App's restarts where the implementation does:
// app/clusterstore's Records keeps them in ConfigMaps of the App's own namespace;
// MemoryJournal only for the process's life (retries of teardowns that ran out of attempts).
type Journal interface {
	Put(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
	List(ctx context.Context) (map[string][]byte, error)
}

// MemoryJournal is a Journal in memory. The zero value is ready to use.
type MemoryJournal struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Put stores data under key.
func (j *MemoryJournal) Put(_ context.Context, key string, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string][]byte{}
	}
	j.m[key] = append([]byte(nil), data...)
	return nil
}

// Delete removes key; a key not there is no error.
func (j *MemoryJournal) Delete(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, key)
	return nil
}

// List returns a copy of every record.
func (j *MemoryJournal) List(context.Context) (map[string][]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return maps.Clone(j.m), nil
}

// The pool's side of the journal: each teardown recorded before it is answered and before
// each attempt, forgotten once done, and read back by a new replica (Resume).

// Record writes t to the journal under its key: before the delivery that asked for it is
// answered (the intake), and again before each attempt.
func (p *Pool) Record(ctx context.Context, t Teardown) error {
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
	now := p.now()
	live, oldest := 0, time.Time{}
	var expired []Teardown
	keys := make([]string, 0, len(recs))
	for k := range recs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
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
		if t.Dead != "" {
			if now.Sub(t.DeadAt) > p.maxAge() {
				_ = p.Journal.Delete(ctx, k) // kept for the operator long enough
			}
			continue
		}
		live++
		if !t.Recorded.IsZero() && (oldest.IsZero() || t.Recorded.Before(oldest)) {
			oldest = t.Recorded
		}
		if p.busy(k) {
			continue
		}
		if !t.Recorded.IsZero() && now.Sub(t.Recorded) > p.maxAge() {
			expired = append(expired, t)
			continue
		}
		p.ready = append(p.ready, t)
		n++
		p.log.Info("teardown resumed from its record", "delivery", t.Delivery, "repository", t.Repository, "pull_request", t.PullRequest, "namespace", t.Namespace)
	}
	if n > 0 {
		p.signal()
	}
	p.backlog.records, p.backlog.oldest = live, oldest
	p.mu.Unlock()
	for _, t := range expired {
		p.deadLetter(t, "max-age", fmt.Errorf("asked for %s ago, more than the %s a teardown may take", now.Sub(t.Recorded).Round(time.Second), p.maxAge()))
	}
	return n, nil
}

// Backlog is the journal as the last Resume read it: the records not dead-lettered, and the
// age of the oldest (0 when there is none).
func (p *Pool) Backlog() (records int, oldest time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.backlog.oldest.IsZero() {
		return p.backlog.records, 0
	}
	return p.backlog.records, p.now().Sub(p.backlog.oldest)
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
		switch err := p.Record(rctx, t); {
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
