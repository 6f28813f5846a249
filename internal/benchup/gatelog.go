package benchup

import (
	"strings"
	"time"

	"github.com/antifailure/af/gate"
)

// Pod is what one pod's logs say of its start: the gate's figures and when its application
// wrote its first line. Times are in ms.
type Pod struct {
	// Gated is true when the pod's gate wrote its verdict; the gate's figures are zero
	// without it.
	Gated bool
	// Gate is the gate's time to its verdict, Sidecar its wait for the sidecar within it (the
	// enforcer letting the new pod reach it) and Rounds the rest: its own rounds.
	Gate, Sidecar, Rounds int64
	// Handoff is the time from the gate's last line to the application's first (the kubelet
	// noticing the init container ended and starting the next); HasHandoff is false when the
	// application has not written yet.
	Handoff    int64
	HasHandoff bool
	// Refused and TimedOut count the gate's attempts denied by a refusal and by a timeout.
	Refused, TimedOut int
	// Start is the time from the moment ReadPod was given to the application's first line;
	// HasStart is false without either.
	Start    int64
	HasStart bool
}

// ReadPod reads one pod's gate log and its application's log, both with the kubelet's
// timestamps (kubectl logs --timestamps), and since, the moment the pod's start is timed from
// (zero: not timed). ok is false when there is nothing to time: a gate that wrote no verdict,
// or a pod without a gate when since is zero.
func ReadPod(gateLog, appLog string, since time.Time) (p Pod, ok bool) {
	var verdict gate.Result
	var last time.Time
	for _, line := range lines(gateLog) {
		t, rest := stamp(line)
		if t.After(last) {
			last = t
		}
		if strings.HasPrefix(rest, gate.VerdictMarker) {
			if r, found := gate.ParseVerdict(rest); found {
				verdict, p.Gated = r, true
			}
			continue
		}
		if _, a, isAttempt := gate.ParseAttemptLine(rest); isAttempt && a.Outcome == gate.Denied {
			switch a.Detail {
			case "timeout":
				p.TimedOut++
			case "connection refused":
				p.Refused++
			}
		}
	}
	var first time.Time
	if app := lines(appLog); len(app) > 0 {
		first, _ = stamp(app[0])
	}
	if !since.IsZero() && !first.IsZero() {
		p.Start, p.HasStart = first.Sub(since).Milliseconds(), true
	}
	if !p.Gated {
		// A gate without a verdict: nothing to time. A pod without a gate: only its start.
		return Pod{Start: p.Start, HasStart: p.HasStart}, len(lines(gateLog)) == 0 && !since.IsZero()
	}
	p.Gate, p.Sidecar, p.Rounds = int64(verdict.MS), int64(verdict.SidecarMS), int64(verdict.MS-verdict.SidecarMS)
	if !first.IsZero() && !last.IsZero() {
		p.Handoff, p.HasHandoff = first.Sub(last).Milliseconds(), true
	}
	return p, true
}

// lines are a log's lines, without the empty ones.
func lines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stamp splits the kubelet's timestamp off a log line: zero, and the line whole, when it has
// none.
func stamp(line string) (time.Time, string) {
	first, rest, found := strings.Cut(line, " ")
	if !found {
		return time.Time{}, line
	}
	t, err := time.Parse(time.RFC3339Nano, first)
	if err != nil {
		return time.Time{}, line
	}
	return t, rest
}
