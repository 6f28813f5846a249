package gate

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// TestDeadlineDiscardsTheCutRound: a round the deadline cuts short is not reported and not
// counted. Its attempts end at the deadline, not in the network: taken for denials they could
// complete an all-denied streak, and taken as the deciding round they hide the routes that got
// out in the last complete round.
func TestDeadlineDiscardsTheCutRound(t *testing.T) {
	// The sidecar answers; the "resolver" receives and never replies, so every attempt runs
	// to its full timeout and is denied by timeout.
	sidecar := acceptor(t, 0)
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	timeout := 300 * time.Millisecond
	res := Check(context.Background(), Config{
		Targets: []Target{{Route: RouteDNS, Addr: silent.LocalAddr().String()}},
		Sidecar: sidecar.Addr().String(),
		// 4 rounds needed, started a timeout apart: 3 complete, the 4th (started at 3×timeout)
		// is cut short by the deadline and must not complete the streak.
		Rounds:   4,
		Timeout:  timeout,
		Interval: timeout,
		Deadline: 3*timeout + timeout/2,
	})
	if res.Verdict != CannotAnswer {
		t.Fatalf("verdict %s after %d rounds: the cut round completed the streak", res.Verdict, res.Rounds)
	}
	if len(res.Routes) != 1 {
		t.Fatalf("routes: %+v", res.Routes)
	}
	// The reported round is a complete one: its attempt ran its whole timeout.
	if a := res.Routes[0]; a.Outcome != Denied || a.MS < float64(timeout.Milliseconds())*0.9 {
		t.Errorf("the reported attempt was cut short: %+v (rounds %d)", a, res.Rounds)
	}
}

// TestEscapeOutlivesTheSidecar: a route that got out in the last complete round is an escape,
// even when the sidecar stops answering before the deadline (a loaded node, a sidecar that
// crashed): the rounds after it prove nothing either way, and must not turn the escape into
// "no answer".
func TestEscapeOutlivesTheSidecar(t *testing.T) {
	sidecar := acceptor(t, 4) // before and after two rounds, then gone
	open := acceptor(t, 0)    // the "internet" answers: every round escapes
	res := Check(context.Background(), Config{
		Targets:  []Target{{Route: RouteTCP, Addr: open.Addr().String()}},
		Sidecar:  sidecar.Addr().String(),
		Rounds:   3,
		Timeout:  100 * time.Millisecond,
		Interval: 10 * time.Millisecond,
		Deadline: time.Second,
	})
	if res.Verdict != Escape || len(res.Escaped) != 1 {
		t.Fatalf("verdict %s (%s) after %d rounds, escaped %+v: want escaped", res.Verdict, res.Reason, res.Rounds, res.Escaped)
	}
}

// acceptor listens on loopback and accepts and closes every connection; after n of them (0:
// never) it stops listening, as a sidecar that went away.
func acceptor(t *testing.T, n int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 1; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			if i == n {
				ln.Close()
				return
			}
		}
	}()
	return ln
}

// scripted returns an attempt function that answers each round as script says: after how
// long, and whether the route got out.
func scripted(script func(round int) (time.Duration, bool), starts *sync.Map) func(context.Context, Target, time.Duration, int) Attempt {
	return func(ctx context.Context, t Target, timeout time.Duration, round int) Attempt {
		starts.LoadOrStore(round, time.Now())
		after, out := script(round)
		select {
		case <-time.After(after):
		case <-ctx.Done():
			return Attempt{Route: t.Route, Target: t.Addr, Outcome: Denied, Detail: "cut"}
		}
		if out {
			return Attempt{Route: t.Route, Target: t.Addr, Outcome: Escaped, Detail: "connected"}
		}
		return Attempt{Route: t.Route, Target: t.Addr, Outcome: Denied, Detail: "timeout"}
	}
}

// TestRoundsOverlap: a round starts Interval after the previous one started, not after it
// ended, so three rounds whose attempts each wait out a long timeout run side by side; and no
// more rounds start than could complete the streak.
func TestRoundsOverlap(t *testing.T) {
	sidecar := acceptor(t, 0)
	var starts sync.Map
	ended := time.Time{}
	var mu sync.Mutex
	cfg := Config{
		Targets:  []Target{{Route: RouteTCP, Addr: "192.0.2.1:443"}},
		Sidecar:  sidecar.Addr().String(),
		Rounds:   3,
		Timeout:  time.Second,
		Interval: 50 * time.Millisecond,
		Deadline: 20 * time.Second,
	}
	inner := scripted(func(int) (time.Duration, bool) { return 400 * time.Millisecond, false }, &starts)
	cfg.attempt = func(ctx context.Context, tg Target, d time.Duration, round int) Attempt {
		a := inner(ctx, tg, d, round)
		if round == 1 {
			mu.Lock()
			ended = time.Now()
			mu.Unlock()
		}
		return a
	}
	res := Check(context.Background(), cfg)
	if res.Verdict != Contained || res.Rounds != 3 {
		t.Fatalf("verdict %s after %d rounds (%s)", res.Verdict, res.Rounds, res.Reason)
	}
	n := 0
	starts.Range(func(any, any) bool { n++; return true })
	if n != 3 {
		t.Errorf("%d rounds started; 3 could complete the streak", n)
	}
	s3, _ := starts.Load(3)
	mu.Lock()
	defer mu.Unlock()
	if !s3.(time.Time).Before(ended) {
		t.Errorf("round 3 started after round 1 ended: the rounds did not overlap")
	}
}

// TestStreakCountsInStartOrder: a round that got out breaks the streak of every round that
// started before it, even one that finishes after it. Round 1 waits out its timeout and is
// denied; round 2 (started later) gets out at once; with 2 rounds needed, rounds 1 and 3 are
// not consecutive: the verdict needs rounds 3 and 4.
func TestStreakCountsInStartOrder(t *testing.T) {
	sidecar := acceptor(t, 0)
	var starts sync.Map
	cfg := Config{
		Targets:  []Target{{Route: RouteTCP, Addr: "192.0.2.1:443"}},
		Sidecar:  sidecar.Addr().String(),
		Rounds:   2,
		Timeout:  time.Second,
		Interval: 50 * time.Millisecond,
		Deadline: 20 * time.Second,
	}
	cfg.attempt = scripted(func(round int) (time.Duration, bool) {
		switch round {
		case 1:
			return 500 * time.Millisecond, false
		case 2:
			return 0, true
		}
		return 100 * time.Millisecond, false
	}, &starts)
	res := Check(context.Background(), cfg)
	if res.Verdict != Contained || res.Rounds != 4 {
		t.Fatalf("verdict %s after %d rounds: want contained after 4 (rounds 3 and 4)", res.Verdict, res.Rounds)
	}
	if len(res.Escaped) != 1 {
		t.Errorf("the escape of round 2 is not reported: %+v", res.Escaped)
	}
}

// TestRoundsBeginApartWhenTheSidecarIsLate: rounds that waited for the sidecar together (a
// dial to a Service with no endpoint yet hangs until the sidecar is ready) still try the
// routes at their own moments, Interval apart, once it answers.
func TestRoundsBeginApartWhenTheSidecarIsLate(t *testing.T) {
	up := time.Now().Add(400 * time.Millisecond)
	var starts sync.Map
	interval := 100 * time.Millisecond
	cfg := Config{
		Targets:  []Target{{Route: RouteTCP, Addr: "192.0.2.1:443"}},
		Sidecar:  "sidecar.test:3128",
		Rounds:   3,
		Timeout:  time.Second,
		Interval: interval,
		Deadline: 20 * time.Second,
	}
	cfg.sidecarCheck = func(ctx context.Context) error {
		select {
		case <-time.After(time.Until(up)):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cfg.attempt = scripted(func(int) (time.Duration, bool) { return 500 * time.Millisecond, false }, &starts)
	res := Check(context.Background(), cfg)
	if res.Verdict != Contained {
		t.Fatalf("verdict %s (%s)", res.Verdict, res.Reason)
	}
	var times []time.Time
	for n := 1; ; n++ {
		v, ok := starts.Load(n)
		if !ok {
			break
		}
		times = append(times, v.(time.Time))
	}
	if len(times) != 3 {
		t.Fatalf("%d rounds tried the routes, want 3", len(times))
	}
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < interval*9/10 {
			t.Errorf("round %d tried the routes %s after round %d: want at least %s apart", i+1, gap.Round(time.Millisecond), i, interval)
		}
	}
}

// TestEscapeEnds: with EscapeEnds (the watch) the check ends at the first counted round that
// got out, escaped, with that round as its routes; without it (the gate, the first probe) the
// same script goes on to a contained verdict once enforcement holds.
func TestEscapeEnds(t *testing.T) {
	sidecar := acceptor(t, 0)
	script := func(round int) (time.Duration, bool) { return 20 * time.Millisecond, round == 2 }
	for _, c := range []struct {
		ends    bool
		verdict string
		rounds  int
	}{{false, Contained, 5}, {true, Escape, 2}} {
		var starts sync.Map
		cfg := Config{
			Targets: []Target{{Route: RouteTCP, Addr: "192.0.2.1:443"}}, Sidecar: sidecar.Addr().String(),
			Rounds: 3, Timeout: time.Second, Interval: 100 * time.Millisecond, Deadline: 20 * time.Second, EscapeEnds: c.ends,
		}
		cfg.attempt = scripted(script, &starts)
		res := Check(context.Background(), cfg)
		if res.Verdict != c.verdict || res.Rounds != c.rounds || len(res.Escaped) != 1 {
			t.Errorf("EscapeEnds=%v: %s after %d rounds, escaped %v; want %s after %d", c.ends, res.Verdict, res.Rounds, res.Escaped, c.verdict, c.rounds)
		}
		if c.ends && (len(res.Routes) != 1 || res.Routes[0].Outcome != Escaped) {
			t.Errorf("EscapeEnds: the routes are not the round that got out: %+v", res.Routes)
		}
	}
}
