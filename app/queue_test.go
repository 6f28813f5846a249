package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// Close gives running work until its context ends, then cancels it and says what was left.
func TestCloseCancelsWhatRuns(t *testing.T) {
	started := make(chan struct{})
	p := NewPool(1, func(ctx context.Context, _ Teardown) error { close(started); <-ctx.Done(); return ctx.Err() }, nil)
	_ = p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: 1})
	_ = p.Enqueue(Teardown{Repository: "acme/shop", PullRequest: 2})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if left := p.Close(ctx); left != 1 {
		t.Fatalf("%d left, want 1 (the one never started)", left)
	}
}

func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
