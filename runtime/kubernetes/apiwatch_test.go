package kubernetes

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeWatches hands out watch.FakeWatchers and counts the opens.
type fakeWatches struct {
	opened  atomic.Int32
	current chan *watch.FakeWatcher
}

func newFakeWatches() *fakeWatches { return &fakeWatches{current: make(chan *watch.FakeWatcher, 8)} }

func (f *fakeWatches) open(context.Context) (watch.Interface, error) {
	f.opened.Add(1)
	w := watch.NewFake()
	f.current <- w
	return w, nil
}

// next is the watch opened last (waiting for it to be opened).
func (f *fakeWatches) next(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-f.current:
		return w
	case <-time.After(5 * time.Second):
		t.Fatal("no watch was opened")
		return nil
	}
}

// watching starts a wait on a fake watch that ends when check says so, and returns the first
// watch opened and the wait's result.
func watching(t *testing.T, fw *fakeWatches, check func() (bool, error)) (*watch.FakeWatcher, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	ch := apiWatches(ctx, fw.open)
	w := fw.next(t)
	done := make(chan error, 1)
	go func() { done <- pollOn(ctx, time.Minute, ch, nil, check) }()
	return w, done
}

// TestPollOnChecksOnEventsNotTicks: with its watch open, a wait checks when the watch sees a
// change (and once when the watch opens), not on every tick; an event ends the wait whose
// check it satisfies.
func TestPollOnChecksOnEventsNotTicks(t *testing.T) {
	var checks atomic.Int32
	var ready atomic.Bool
	w, done := watching(t, newFakeWatches(), func() (bool, error) {
		checks.Add(1)
		return ready.Load(), nil
	})
	// Nothing changes for a second: four ticks of pollEvery pass, no check is due (safetyEvery
	// is 2 s); the first check and the one the watch's opening asks for are all.
	time.Sleep(time.Second)
	if n := checks.Load(); n > 2 {
		t.Fatalf("%d checks in a second without a change, with the watch open: it polled", n)
	}
	ready.Store(true)
	w.Modify(&corev1.Pod{})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(safetyEvery / 2):
		t.Fatal("the change the watch saw did not end the wait before the next safety check")
	}
}

// TestPollOnOpensAgainAndChecks: a watch the API server ends is opened again, and a change
// made meanwhile (it has no event) is not missed: the wait checks while the watch is closed
// and when it opens again.
func TestPollOnOpensAgainAndChecks(t *testing.T) {
	fw := newFakeWatches()
	var ready atomic.Bool
	first, done := watching(t, fw, func() (bool, error) { return ready.Load(), nil })
	time.Sleep(300 * time.Millisecond)
	ready.Store(true) // changed while no event says so
	first.Stop()
	fw.next(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(safetyEvery / 2):
		t.Fatal("the wait did not check when its watch was opened again")
	}
	if n := fw.opened.Load(); n != 2 {
		t.Fatalf("opened %d watches, want 2", n)
	}
}

// TestPollOnPollsWhenItMayNotWatch: an identity that may not watch still waits, polling
// every pollEvery as before.
func TestPollOnPollsWhenItMayNotWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch := apiWatches(ctx, func(context.Context) (watch.Interface, error) {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no watch"))
	})
	var checks atomic.Int32
	err := pollOn(ctx, 2*time.Second, ch, nil, func() (bool, error) {
		return checks.Add(1) >= 3, nil
	})
	if err != nil {
		t.Fatalf("the wait did not end by polling: %v after %d checks", err, checks.Load())
	}
	if ch.open() {
		t.Fatal("a forbidden watch counts as open")
	}
}
