package gate

import (
	"context"
	"net"
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
		// 4 rounds needed, 3 fit: the 4th is cut short by the deadline, and must not complete
		// the streak.
		Rounds:   4,
		Timeout:  timeout,
		Interval: time.Millisecond,
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
