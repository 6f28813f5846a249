package benchup

import (
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/gate"
)

// A gate's log as kubectl logs --timestamps shows it: its rounds, its verdict, its hold.
var gateLog = strings.Join([]string{
	`2026-12-03T10:00:00.100000000Z af-gate round=1 route=tcp-public target=198.51.100.10:80 outcome=denied detail="timeout" ms=1000.2`,
	`2026-12-03T10:00:00.100000000Z af-gate round=1 route=udp-dns target=198.51.100.53:53 outcome=denied detail="connection refused" ms=1.0`,
	`2026-12-03T10:00:00.2Z af-gate round=2 route=sidecar target=10.0.0.2:3128 outcome=unreachable detail="timeout"`,
	`2026-12-03T10:00:00.300000000Z af-gate round=3 route=metadata target=198.51.100.80:80 outcome=escaped detail="answered" ms=2.0`,
	`2026-12-03T10:00:01.400000000Z ` + gate.Result{Verdict: gate.Contained, Rounds: 3, MS: 1400.7, SidecarMS: 250.2}.Line(),
	`2026-12-03T10:00:01.500000000Z af-gate hold=10.96.0.9:7 released after 90 ms`,
	``,
}, "\n")

func TestReadPod(t *testing.T) {
	app := "2026-12-03T10:00:02.250000000Z listening on :8080\n2026-12-03T10:00:03Z second line\n"
	since := time.Date(2026, 12, 3, 9, 59, 59, 0, time.UTC)
	p, ok := ReadPod(gateLog, app, since)
	want := Pod{Gated: true, Gate: 1400, Sidecar: 250, Rounds: 1150, Handoff: 750, HasHandoff: true, Refused: 1, TimedOut: 1, Start: 3250, HasStart: true}
	if !ok || p != want {
		t.Errorf("ReadPod = %+v, %v; want %+v", p, ok, want)
	}
	// Not timed from a moment; the application has not written yet.
	p, ok = ReadPod(gateLog, "", time.Time{})
	if want := (Pod{Gated: true, Gate: 1400, Sidecar: 250, Rounds: 1150, Refused: 1, TimedOut: 1}); !ok || p != want {
		t.Errorf("without the application's line: %+v, %v; want %+v", p, ok, want)
	}
	// A pod without a gate (a plain pod): only its start, and only when timed.
	if p, ok := ReadPod("", app, since); !ok || p != (Pod{Start: 3250, HasStart: true}) {
		t.Errorf("a plain pod: %+v, %v", p, ok)
	}
	if _, ok := ReadPod("", app, time.Time{}); ok {
		t.Error("a pod without a gate, untimed, has figures")
	}
	// A gate that wrote no verdict: nothing to time, even timed.
	noVerdict := strings.SplitN(gateLog, "\n", 2)[0]
	if _, ok := ReadPod(noVerdict, app, since); ok {
		t.Error("a gate without a verdict has figures")
	}
}
