package gate

import (
	"fmt"
	"strings"
)

// LogPrefix starts every line the gate writes of its rounds and of its hold (not the verdict
// line, which starts with VerdictMarker).
const LogPrefix = "af-gate "

// attemptLine is the line Check writes of one attempt, after LogPrefix; attemptScan reads it
// back (ParseAttemptLine). Change them together: TestAttemptLineRoundTrip holds them to it.
const (
	attemptLine = "round=%d route=%s target=%s outcome=%s detail=%q ms=%.1f"
	attemptScan = "round=%d route=%s target=%s outcome=%s detail=%q ms=%g"
)

// ParseAttemptLine reads one attempt line of the gate's log (LogPrefix, then the round, the
// route, its target, the outcome, its detail and the time it took) back into the round and the
// attempt. Any other line (the sidecar unreachable, a round discarded, the hold, the verdict)
// is not one: ok is false.
func ParseAttemptLine(line string) (round int, a Attempt, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(line), LogPrefix)
	if !found {
		return 0, Attempt{}, false
	}
	var outcome string
	if n, err := fmt.Sscanf(rest, attemptScan, &round, &a.Route, &a.Target, &outcome, &a.Detail, &a.MS); err != nil || n != 6 {
		return 0, Attempt{}, false
	}
	a.Outcome = Outcome(outcome)
	return round, a, true
}
