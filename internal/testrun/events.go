package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	Elapsed     float64
	ImportPath  string // build-output and build-fail events
	FailedBuild string
}

// Test is the outcome of one test (or subtest) in one phase.
type Test struct {
	Package string  `json:"package"`
	Name    string  `json:"name"`
	Action  string  `json:"action"` // pass, fail, skip
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
}

// ID names a test across phases.
func (t Test) ID() string { return t.Package + " " + t.Name }

// collector reads a go test -json stream and keeps what a phase record needs: every test's
// outcome with its skip reason, the tests that started, the packages that failed (a build
// failure or a failing test binary) and the output of what failed.
type collector struct {
	tests    map[string]*Test
	order    []string
	started  map[string]bool // package + " " + top-level test name
	output   map[string]*strings.Builder
	pkgFail  map[string]bool
	pkgSeen  map[string]bool
	badLines int
	// echo receives what the reader prints: everything (verbose), or the package lines,
	// build output, and the output of failed tests and the reasons of skipped ones.
	echo    io.Writer
	verbose bool
}

func newCollector(echo io.Writer, verbose bool) *collector {
	return &collector{tests: map[string]*Test{}, started: map[string]bool{}, output: map[string]*strings.Builder{},
		pkgFail: map[string]bool{}, pkgSeen: map[string]bool{}, echo: echo, verbose: verbose}
}

// read consumes the stream; a line that is not an event is printed as it is (go test's own
// messages, a panic of the go command).
func (c *collector) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		c.line(sc.Bytes())
	}
	return sc.Err()
}

func (c *collector) line(b []byte) {
	var ev event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &ev) != nil {
		c.badLines++
		fmt.Fprintf(c.echo, "%s\n", b)
		return
	}
	switch ev.Action {
	case "build-output":
		fmt.Fprint(c.echo, ev.Output)
		return
	case "build-fail":
		c.pkgFail[ev.ImportPath] = true
		return
	}
	if ev.Test == "" {
		switch ev.Action {
		case "output":
			fmt.Fprint(c.echo, ev.Output)
		case "fail":
			c.pkgSeen[ev.Package], c.pkgFail[ev.Package] = true, true
		case "pass", "skip":
			c.pkgSeen[ev.Package] = true
		}
		return
	}
	key := ev.Package + " " + ev.Test
	switch ev.Action {
	case "run":
		if !strings.Contains(ev.Test, "/") {
			c.started[key] = true
		}
	case "output":
		if c.verbose {
			fmt.Fprint(c.echo, ev.Output)
		}
		b := c.output[key]
		if b == nil {
			b = &strings.Builder{}
			c.output[key] = b
		}
		if b.Len() < 1<<20 {
			b.WriteString(ev.Output)
		}
	case "pass", "fail", "skip":
		t := c.tests[key]
		if t == nil {
			t = &Test{Package: ev.Package, Name: ev.Test}
			c.tests[key] = t
			c.order = append(c.order, key)
		}
		t.Action, t.Seconds = ev.Action, ev.Elapsed
		out := ""
		if b := c.output[key]; b != nil {
			out = b.String()
		}
		if ev.Action == "skip" {
			t.Reason = skipReason(out)
			if !c.verbose {
				fmt.Fprintf(c.echo, "--- SKIP: %s (%s): %s\n", ev.Test, ev.Package, t.Reason)
			}
		}
		if ev.Action == "fail" {
			t.Reason = failReason(out)
			if !c.verbose {
				fmt.Fprint(c.echo, out)
			}
		}
		delete(c.output, key)
	}
}

// results lists the tests in the order they ended.
func (c *collector) results() []Test {
	out := make([]Test, 0, len(c.order))
	for _, k := range c.order {
		out = append(out, *c.tests[k])
	}
	return out
}

// failedPackages lists the packages that failed, sorted.
func (c *collector) failedPackages() []string {
	var out []string
	for p := range c.pkgFail {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// failReason is the last line a failed test wrote that is not go test's own, cut to 300
// characters: its error, as a run's summary shows it.
func failReason(out string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "=== ") || l == "FAIL" {
			continue
		}
		last = l
	}
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return last
}

// skipReason is the reason a skipped test gave: the text after "SKIPPED:" where it says so,
// else its last line of output that is not go test's own "--- SKIP" line.
func skipReason(out string) string {
	var last string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if _, after, ok := strings.Cut(l, "SKIPPED:"); ok && strings.TrimSpace(after) != "" {
			return strings.TrimSpace(after)
		}
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		last = l
	}
	if _, after, ok := strings.Cut(last, ".go:"); ok {
		if _, msg, ok := strings.Cut(after, ": "); ok {
			return msg
		}
	}
	return last
}

// runAlternatives splits a -run pattern into the alternatives that each must match a test
// that ran: the top-level '|'-separated parts of its first element (before a '/'), with the
// pattern's outer anchors and group kept around each. A pattern of one alternative gives
// itself.
func runAlternatives(pattern string) ([]*regexp.Regexp, error) {
	first := splitTop(pattern, '/')[0]
	anchorStart, anchorEnd := strings.HasPrefix(first, "^"), strings.HasSuffix(first, "$") && !strings.HasSuffix(first, `\$`)
	body := strings.TrimSuffix(strings.TrimPrefix(first, "^"), "$")
	if !anchorEnd {
		body = strings.TrimPrefix(first, "^")
	}
	if strings.HasPrefix(body, "(") && strings.HasSuffix(body, ")") && balanced(body[1:len(body)-1]) {
		body = body[1 : len(body)-1]
	}
	var out []*regexp.Regexp
	for _, alt := range splitTop(body, '|') {
		expr := alt
		if anchorStart {
			expr = "^(?:" + expr + ")"
		}
		if anchorEnd {
			expr += "$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("-run %q: %w", pattern, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// splitTop splits s at sep where sep stands outside parentheses and brackets, and is not
// escaped.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, bracket, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case ch == '\\':
			i++
		case bracket:
			if ch == ']' {
				bracket = false
			}
		case ch == '[':
			bracket = true
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// balanced reports whether s's parentheses pair up without ever closing more than opened.
func balanced(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}
