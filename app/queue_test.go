package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/antifailure/af/github/report"
)

// 100 pull requests closed at once, each delivered twice, some failing at first: every one is
// torn down exactly once successfully, never by two workers at the same time.
func TestHundredAtOnce(t *testing.T) {
	var mu sync.Mutex
	busy := map[string]bool{}
	done := map[string]int{}
	tries := map[string]int{}
	var overlap atomic.Int32
	exec := func(_ context.Context, td Teardown) error {
		k := key(td)
		mu.Lock()
		if busy[k] {
			overlap.Add(1)
		}
		busy[k] = true
		tries[k]++
		n := tries[k]
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		busy[k] = false
		if td.PullRequest%10 == 0 && n == 1 {
			return errors.New("the API server is restarting")
		}
		done[k]++
		return nil
	}
	p := NewPool(8, exec, nil)
	p.Base = time.Millisecond
	for round := 0; round < 2; round++ {
		var wg sync.WaitGroup
		for i := 1; i <= 100; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: i, Delivery: fmt.Sprint(round, "-", i)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	if left := p.Close(contextWithTimeout(t, 30*time.Second)); left != 0 {
		t.Fatalf("%d teardowns left undone", left)
	}
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d times two workers held one pull request", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 100 {
		t.Fatalf("%d pull requests torn down, want 100", len(done))
	}
	for k, n := range done {
		// A second delivery that arrives while the first is queued is merged; one that arrives
		// while it runs runs once more after it (idempotent). Never more.
		if n < 1 || n > 2 {
			t.Fatalf("%s torn down %d times", k, n)
		}
	}
	if err := p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// A teardown that keeps failing stops after Attempts; the backoff doubles, jittered.
func TestBackoff(t *testing.T) {
	var waits []time.Duration
	var mu sync.Mutex
	calls := 0
	p := NewPool(1, func(context.Context, Teardown) error { calls++; return errors.New("no") }, nil)
	p.Attempts, p.Base, p.Max = 5, 100*time.Millisecond, 300*time.Millisecond
	p.Sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	}
	_ = p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: 1})
	p.Close(contextWithTimeout(t, 5*time.Second))
	if calls != 5 || len(waits) != 4 {
		t.Fatalf("%d calls, %d waits, want 5 and 4", calls, len(waits))
	}
	ceilings := []time.Duration{100, 200, 300, 300}
	for i, w := range waits {
		if c := ceilings[i] * time.Millisecond; w < c/2 || w > c {
			t.Fatalf("wait %d is %s, want between %s and %s", i, w, c/2, c)
		}
	}
}

// Close gives running work until its context ends, then cancels it and says what was left:
// the one cut short and the one never started, both recorded; the next pool's Resume runs them
// and their records go.
func TestCloseRecordsWhatItLeaves(t *testing.T) {
	j := &MemoryJournal{}
	started := make(chan struct{})
	p := NewPool(1, func(ctx context.Context, _ Teardown) error { close(started); <-ctx.Done(); return ctx.Err() }, nil)
	p.Journal = j
	_ = p.Enqueue(Teardown{Delivery: "d1", Repository: "acme/shop", PullRequest: 1, Reason: report.ReasonMerged})
	_ = p.Enqueue(Teardown{Delivery: "d2", Repository: "acme/shop", PullRequest: 2, Reason: report.ReasonClosed})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if left := p.Close(ctx); left != 2 {
		t.Fatalf("%d left, want 2 (the one cut short, the one never started)", left)
	}
	recs, _ := j.List(context.Background())
	if len(recs) != 2 {
		t.Fatalf("records after Close: %v", recs)
	}

	var mu sync.Mutex
	got := map[int]Teardown{}
	next := NewPool(2, func(_ context.Context, td Teardown) error {
		mu.Lock()
		defer mu.Unlock()
		// The record is there while the teardown runs: a crash now loses nothing.
		if r, _ := j.List(context.Background()); len(r) == 0 {
			t.Errorf("teardown of #%d runs without its record", td.PullRequest)
		}
		got[td.PullRequest] = td
		return nil
	}, nil)
	next.Journal = j
	n, err := next.Resume(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("Resume: %d, %v", n, err)
	}
	if n, _ := next.Resume(context.Background()); n != 0 {
		t.Fatalf("a second Resume queued %d teardowns already queued or running", n)
	}
	if left := next.Close(contextWithTimeout(t, 10*time.Second)); left != 0 {
		t.Fatalf("%d left", left)
	}
	if got[1].Delivery != "d1" || got[1].Reason != report.ReasonMerged || got[2].Delivery != "d2" || len(got) != 2 {
		t.Fatalf("resumed %+v", got)
	}
	if recs, _ := j.List(context.Background()); len(recs) != 0 {
		t.Fatalf("records after the resumed teardowns ended well: %v", recs)
	}
}

// A teardown whose attempts run out keeps its record, so the next sweep's Resume tries again;
// one whose record cannot be written is never started (nothing removed unrecorded).
func TestRecordOutlivesAttempts(t *testing.T) {
	j := &failingJournal{fail: 2}
	var mu sync.Mutex
	calls := 0
	fail := true
	p := NewPool(1, func(context.Context, Teardown) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if fail {
			return errors.New("the API server is away")
		}
		return nil
	}, nil)
	p.Journal = j
	p.Attempts = 4
	p.Sleep = func(context.Context, time.Duration) error { return nil }
	_ = p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: 7})
	waitUntil(t, func() bool { return p.Depth() == 0 && !p.isRunning("acme/shop#7") })
	mu.Lock()
	if calls != 2 { // attempts 1 and 2 could not write the record; 3 and 4 ran and failed
		t.Fatalf("%d executions, want 2", calls)
	}
	fail = false
	mu.Unlock()
	if recs, _ := j.List(context.Background()); len(recs) != 1 {
		t.Fatalf("records after the attempts ran out: %v", recs)
	}
	if n, err := p.Resume(context.Background()); n != 1 || err != nil {
		t.Fatalf("Resume: %d, %v", n, err)
	}
	p.Close(contextWithTimeout(t, 10*time.Second))
	if recs, _ := j.List(context.Background()); len(recs) != 0 || calls != 3 {
		t.Fatalf("records %v, %d executions", recs, calls)
	}
}

// failingJournal refuses its first fail Puts.
type failingJournal struct {
	MemoryJournal
	mu   sync.Mutex
	fail int
}

func (f *failingJournal) Put(ctx context.Context, k string, b []byte) error {
	f.mu.Lock()
	if f.fail > 0 {
		f.fail--
		f.mu.Unlock()
		return errors.New("configmaps is forbidden")
	}
	f.mu.Unlock()
	return f.MemoryJournal.Put(ctx, k, b)
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("not so after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (p *Pool) isRunning(k string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running[k]
}
