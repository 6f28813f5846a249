package gate

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestAttemptLineRoundTrip: every attempt line Check writes reads back as the attempt it wrote,
// and the other lines of a gate's log do not read as attempts.
func TestAttemptLineRoundTrip(t *testing.T) {
	// One route, one attempt a round: two rounds that break the streak, then the two denied
	// ones that make the verdict.
	want := []Attempt{
		{Route: RouteLinkLocal, Target: "ff02::1+neighbours", Outcome: Unknown, Detail: `odd "quoted" detail`, MS: 0.5},
		{Route: RouteNode, Target: "10.244.0.1:30999/udp", Outcome: Escaped, Detail: "answered", MS: 3.4},
		{Route: RouteTCP, Target: "198.51.100.10:80", Outcome: Denied, Detail: "connection refused", MS: 1.2},
		{Route: RouteDNS, Target: "198.51.100.53:53", Outcome: Denied, Detail: "timeout", MS: 1000},
	}
	var out strings.Builder
	res := Check(context.Background(), Config{
		Targets:      []Target{{Route: "only"}},
		Sidecar:      "sidecar:3128",
		Rounds:       2,
		Interval:     -1,
		Deadline:     time.Second,
		Out:          &out,
		sidecarCheck: func(context.Context) error { return nil },
		attempt: func(_ context.Context, _ Target, _ time.Duration, round int) Attempt {
			return want[(round-1)%len(want)]
		},
	})
	var got []Attempt
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		round, a, ok := ParseAttemptLine(line)
		if !ok {
			t.Fatalf("not read as an attempt: %q", line)
		}
		if round != len(got)+1 {
			t.Errorf("%q: round %d, want %d", line, round, len(got)+1)
		}
		got = append(got, a)
	}
	if res.Verdict != Contained || len(got) != len(want) || res.Rounds != len(want) {
		t.Fatalf("verdict %s, %d attempt lines for %d rounds, want %d:\n%s", res.Verdict, len(got), res.Rounds, len(want), out.String())
	}
	for i, a := range got {
		if w := want[i]; a != w {
			t.Errorf("line %d read as %+v, written from %+v", i+1, a, w)
		}
	}
	for _, line := range []string{
		`af-gate round=2 route=sidecar target=sidecar:3128 outcome=unreachable detail="timeout"`,
		"af-gate round=3 discarded: the deadline passed during it",
		"af-gate hold=10.0.0.1:1 released after 12 ms",
		Result{Verdict: Contained, Rounds: 3, MS: 1400}.Line(),
		"",
	} {
		if _, a, ok := ParseAttemptLine(line); ok {
			t.Errorf("%q read as an attempt: %+v", line, a)
		}
	}
}
