package app

// The webhook's load bound. A delivery's body (up to MaxBody, 25 MB) has to be read whole
// before its signature can be checked, so every request in flight may hold that much memory,
// and anyone who can reach the public port can send one. The limit lets at most MaxInFlight
// requests through the webhook handler at once (default 4: 4 × 25 MB = 100 MB of bodies,
// within the Deployment's 256Mi); a request that finds no slot waits up to InFlightWait for
// one (bounded by its own context) and then gets 503 with Retry-After. The management routes
// (manage.go) are not limited: probes and scrapes answer while the webhook is saturated.

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Busy is the delivery result of a request refused because the webhook had no free slot
// within the wait (503).
const Busy = "busy"

// Defaults of Config.MaxInFlight and Config.InFlightWait.
const (
	DefaultMaxInFlight  = 4
	DefaultInFlightWait = 10 * time.Second
)

// limiter is a counting semaphore around a handler.
type limiter struct {
	slots chan struct{}
	wait  time.Duration
	// gauge, when set, is the number of slots held; busy, when set, is told of each refusal.
	gauge prometheus.Gauge
	busy  func()
}

// newLimiter bounds a handler to max requests at once (≤ 0: DefaultMaxInFlight), each waiting
// up to wait (≤ 0: DefaultInFlightWait) for a slot.
func newLimiter(max int, wait time.Duration) *limiter {
	if max <= 0 {
		max = DefaultMaxInFlight
	}
	if wait <= 0 {
		wait = DefaultInFlightWait
	}
	return &limiter{slots: make(chan struct{}, max), wait: wait}
}

// acquire takes a slot, waiting up to l.wait or until done; false when none came.
func (l *limiter) acquire(done <-chan struct{}) bool {
	select {
	case l.slots <- struct{}{}:
	default:
		t := time.NewTimer(l.wait)
		defer t.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-t.C:
			return false
		case <-done:
			return false
		}
	}
	if l.gauge != nil {
		l.gauge.Inc()
	}
	return true
}

func (l *limiter) release() {
	if l.gauge != nil {
		l.gauge.Dec()
	}
	<-l.slots
}

// inFlight is the number of slots held.
func (l *limiter) inFlight() int { return len(l.slots) }

// wrap returns h behind the limit. A refused request's body is not read; it is answered 503
// with Retry-After (the wait, in whole seconds) and a plain message.
func (l *limiter) wrap(h http.Handler) http.Handler {
	retry := fmt.Sprint(int(math.Ceil(l.wait.Seconds())))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.acquire(r.Context().Done()) {
			if l.busy != nil {
				l.busy()
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Retry-After", retry)
			// The body is left unread: tell net/http not to keep the connection for another.
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "busy: %d deliveries are being read; try again in %ss\n", cap(l.slots), retry)
			return
		}
		defer l.release()
		h.ServeHTTP(w, r)
	})
}
