// Package gate holds the route checks that prove an environment is contained: the per-pod gate
// (an init container that keeps application code from starting) and the namespace probe run
// the same checks. Each round tries every escape route: direct TCP to a public address, a UDP
// DNS query straight to a public resolver, HTTP to the metadata endpoint, TCP to the cluster's
// API server, the pod's IPv6 segment, and the node (the ports named, and the NodePort range
// for a listener nobody named). The sidecar must be reachable before and after every round, because a pod cut
// off from everything proves nothing. The verdict needs N consecutive rounds in which every
// route was denied.
//
// Every target is configuration. The defaults are the production ones (a public resolver and
// address, 169.254.169.254, the API server from the pod's environment); tests never use them.
package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Route names.
const (
	RouteTCP       = "tcp-public"
	RouteDNS       = "udp-dns"
	RouteMetadata  = "metadata"
	RouteAPIServer = "apiserver"
	// RouteLinkLocal is the pod's IPv6 segment: neighbours over fe80:: (see linklocal.go).
	RouteLinkLocal = "ipv6-link-local"
	// RouteNode is the node the pod runs on, at its own address, on a port it serves.
	RouteNode = "node-local"
)

// Target is one route and the address it tries.
type Target struct {
	Route string `json:"route"`
	// Addr is host:port (for the link-local route: the group and the ports it tries).
	Addr string `json:"target"`
	// Network is "udp" for a UDP target of the node route; empty is the route's own.
	Network string `json:"network,omitempty"`
	// ports are the link-local route's TCP ports.
	ports []portSpec
	// env is what the link-local route reads of the pod (nil: the real one).
	env *linkLocalEnv
	// unannounced is the node-unannounced route's node, samples and control.
	unannounced *unannounced
}

// Config says what to try and how long to keep trying.
type Config struct {
	Targets []Target
	// Sidecar is the sidecar's proxy address (host:port); it must answer around every round.
	Sidecar string
	// Rounds is how many consecutive all-denied rounds make the verdict (default 3).
	Rounds int
	// Timeout bounds each attempt (default 1s).
	Timeout time.Duration
	// Interval is the time between the starts of rounds (default 200ms): rounds overlap when
	// attempts wait out their timeout.
	Interval time.Duration
	// Deadline bounds the whole check (default 60s).
	Deadline time.Duration
	// Out receives one line per route per round (nil: none).
	Out io.Writer
	// EscapeEnds ends the check at the first counted round in which a route got out, with an
	// escaped verdict. The gate and the first probe wait for enforcement that may come late;
	// the watch, checking an environment that was contained, has its answer there.
	EscapeEnds bool
	// attempt and sidecarCheck replace the real try of a route and of the sidecar in this
	// package's tests.
	attempt      func(ctx context.Context, t Target, timeout time.Duration, round int) Attempt
	sidecarCheck func(ctx context.Context) error
}

// Verdicts.
const (
	Contained    = "contained"
	Escape       = "escaped"
	CannotAnswer = "no-answer"
)

// Exit statuses of `af gate` and `af probe`.
const (
	ExitContained    = 0
	ExitEscaped      = 3
	ExitCannotAnswer = 4
)

// Attempt is one try of one route.
type Attempt struct {
	Route   string  `json:"route"`
	Target  string  `json:"target"`
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail"`
	MS      float64 `json:"ms"`
}

// Result is the verdict.
type Result struct {
	Verdict string `json:"verdict"`
	// Rounds is how many rounds ran.
	Rounds int `json:"rounds"`
	// Routes holds each route's outcome in the deciding round (the last one).
	Routes []Attempt `json:"routes"`
	// Escaped names every route that got out in any round, with the first time it did.
	Escaped []Attempt `json:"escaped,omitempty"`
	// Reason says why there is no answer, when there is none.
	Reason string  `json:"reason,omitempty"`
	MS     float64 `json:"ms"`
	// SidecarMS is how long the check waited for the sidecar before the first round that
	// tried the routes (the rest of MS is the rounds'); 0 when no round did.
	SidecarMS float64 `json:"sidecar_ms,omitempty"`
	// At is when the check ended (af probe and af gate set it): the watch's readers judge by
	// it how old the last verdict is.
	At time.Time `json:"at,omitzero"`
}

// Exit returns the process exit status for the verdict.
func (r Result) Exit() int {
	switch r.Verdict {
	case Contained:
		return ExitContained
	case Escape:
		return ExitEscaped
	}
	return ExitCannotAnswer
}

// VerdictMarker starts the machine-readable verdict line the runtime looks for in the log.
const VerdictMarker = "AF-VERDICT "

// Line returns the verdict line: the marker and the result as JSON.
func (r Result) Line() string {
	b, _ := json.Marshal(r)
	return VerdictMarker + string(b)
}

// ParseVerdict finds the verdict line in a log and decodes it.
func ParseVerdict(log string) (Result, bool) {
	var r Result
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), VerdictMarker); ok {
			if json.Unmarshal([]byte(rest), &r) == nil && r.Verdict != "" {
				return r, true
			}
		}
	}
	return r, false
}

func (c *Config) defaults() {
	if c.Rounds < 1 {
		c.Rounds = 3
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.Interval < 0 {
		c.Interval = 0
	} else if c.Interval == 0 {
		c.Interval = 200 * time.Millisecond
	}
	if c.Deadline <= 0 {
		c.Deadline = 60 * time.Second
	}
}

// Check runs rounds until Rounds consecutive rounds find every route denied with the sidecar
// reachable around them (contained), or the deadline passes: escaped when a route got out in
// the last complete round, otherwise no answer.
//
// Rounds overlap: a new one starts Interval after the previous one started, while the rounds
// under way (and the all-denied streak so far) could still fall short of Rounds, so a route
// the network drops (an attempt that waits out its whole timeout) does not hold up the next
// round. Every round still tries every route, at its own moment, with the sidecar checked
// before and after it; rounds count in the order they started, so "consecutive" means what it
// says: a round that got out breaks the streak of every round that started before it.
func Check(ctx context.Context, cfg Config) Result {
	cfg.defaults()
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	res := Result{Verdict: CannotAnswer}
	escaped := map[string]Attempt{}
	results := make(chan roundResult)
	// begun carries the moment a round's attempts began (its sidecar check done): the next
	// round waits Interval from then, so every round tries the routes at its own moment even
	// when rounds had to wait for the sidecar together.
	begun := make(chan time.Time)
	var (
		started, next = 0, 1 // rounds started; the next one to count, in start order
		running       = 0
		pending       = map[int]roundResult{} // done, not yet counted (an earlier one runs)
		streak        = 0
		last          []Attempt
		lastReason    = ""
		lastStart     time.Time
		beginning     = false // a round started and has not begun its attempts
	)
	// reach is how many rounds could still complete the streak: the streak counted so far and
	// every round after it that is under way or done and all denied; one done and not all
	// denied voids every round before it.
	reach := func() int {
		n := streak
		for k := next; k <= started; k++ {
			if r, ok := pending[k]; ok && !r.allDenied() {
				n = 0
				continue
			}
			n++
		}
		return n
	}
	count := func(r roundResult) {
		if r.before == nil && res.SidecarMS == 0 {
			res.SidecarMS = ms(r.began.Sub(start))
		}
		if r.before != nil {
			lastReason = "the sidecar did not answer before the round: " + r.before.Error()
			cfg.log("round=%d route=sidecar target=%s outcome=unreachable detail=%q", r.n, cfg.Sidecar, r.before.Error())
			// The streak is broken; the last complete round stays the evidence: a route that got
			// out there is an escape even when the sidecar stops answering afterwards.
			streak = 0
			return
		}
		for _, a := range r.attempts {
			cfg.log(attemptLine, r.n, a.Route, a.Target, a.Outcome, a.Detail, a.MS)
			if a.Outcome == Escaped {
				if _, seen := escaped[a.Route+" "+a.Target]; !seen {
					escaped[a.Route+" "+a.Target] = a
				}
			}
		}
		last = r.attempts
		if r.after != nil {
			lastReason = "the sidecar did not answer after the round: " + r.after.Error()
			cfg.log("round=%d route=sidecar target=%s outcome=unreachable detail=%q", r.n, cfg.Sidecar, r.after.Error())
		}
		if r.allDenied() {
			streak++
			return
		}
		streak = 0
		if r.after == nil && (lastReason == "" || hasEscape(r.attempts) || hasUnknown(r.attempts)) {
			lastReason = describe(r.attempts)
		}
	}
	for {
		if ctx.Err() != nil && running == 0 {
			res.finish(cfg, last, lastReason)
			break
		}
		// Start a round when it is due and could matter.
		var due <-chan time.Time
		if ctx.Err() == nil && !beginning && reach() < cfg.Rounds {
			if wait := time.Until(lastStart.Add(cfg.Interval)); started > 0 && wait > 0 {
				due = time.After(wait)
			} else {
				started++
				running++
				beginning = true
				go func(n int) { results <- runRound(ctx, cfg, n, begun) }(started)
				continue
			}
		}
		var done <-chan struct{}
		if ctx.Err() == nil {
			done = ctx.Done()
		}
		select {
		case <-due:
		case at := <-begun:
			beginning, lastStart = false, at
		case <-done: // the rounds under way end at the deadline and are discarded
		case r := <-results:
			running--
			// (By the clock too: an attempt can end at the deadline a moment before the
			// context's timer marks it done.)
			if deadline, _ := ctx.Deadline(); ctx.Err() != nil || !time.Now().Before(deadline) {
				// The deadline cut this round short: its attempts ended by the deadline, not by
				// the network, so they are neither denials nor part of the verdict.
				cfg.log("round=%d discarded: the deadline passed during it", r.n)
				r.cut = true
			}
			pending[r.n] = r
			for {
				pr, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if pr.cut {
					continue
				}
				res.Rounds++
				count(pr)
				if streak >= cfg.Rounds {
					res.Verdict, res.Routes = Contained, last
					break
				}
				if cfg.EscapeEnds && pr.before == nil && hasEscape(pr.attempts) {
					res.Verdict, res.Routes = Escape, pr.attempts
					break
				}
			}
		}
		if res.Verdict == Contained || res.Verdict == Escape {
			break
		}
	}
	cancel()
	for running > 0 { // the rounds cut short by the verdict: never counted
		select {
		case <-results:
			running--
		case <-begun:
		}
	}
	for _, a := range escaped {
		res.Escaped = append(res.Escaped, a)
	}
	sort.Slice(res.Escaped, func(i, j int) bool {
		if res.Escaped[i].Route != res.Escaped[j].Route {
			return res.Escaped[i].Route < res.Escaped[j].Route
		}
		return res.Escaped[i].Target < res.Escaped[j].Target
	})
	res.MS = ms(time.Since(start))
	return res
}

// roundResult is one round: the sidecar before it, every route, the sidecar after it.
type roundResult struct {
	n             int
	began         time.Time // when its attempts began (its sidecar check done)
	before, after error
	attempts      []Attempt
	cut           bool
}

func (r roundResult) allDenied() bool {
	if r.before != nil || r.after != nil {
		return false
	}
	for _, a := range r.attempts {
		if a.Outcome != Denied {
			return false
		}
	}
	return true
}

// finish gives the verdict when the deadline passed: escaped when a route got out in the last
// complete round, otherwise no answer.
func (res *Result) finish(cfg Config, last []Attempt, lastReason string) {
	res.Routes = last
	if hasEscape(last) {
		res.Verdict = Escape
		return
	}
	res.Verdict = CannotAnswer
	res.Reason = fmt.Sprintf("no %d consecutive all-denied rounds within %s: %s", cfg.Rounds, cfg.Deadline, lastReason)
}

func hasEscape(as []Attempt) bool {
	for _, a := range as {
		if a.Outcome == Escaped {
			return true
		}
	}
	return false
}

func hasUnknown(as []Attempt) bool {
	for _, a := range as {
		if a.Outcome == Unknown {
			return true
		}
	}
	return false
}

func describe(as []Attempt) string {
	var parts []string
	for _, a := range as {
		if a.Outcome != Denied {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", a.Route, a.Outcome, a.Detail))
		}
	}
	return strings.Join(parts, ", ")
}

func (c Config) log(format string, args ...any) {
	if c.Out != nil {
		fmt.Fprintf(c.Out, LogPrefix+format+"\n", args...)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
