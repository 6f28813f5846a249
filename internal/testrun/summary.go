package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// expectedSkip is one line of the checked-in list: a test this machine kind cannot run under
// make test, and why.
type expectedSkip struct {
	Package, Name, Reason string
}

// readExpected reads the list: one skip a line, "PACKAGE TEST REASON..." with PACKAGE relative
// to the module ("." for its root) and a reason required; '#' starts a comment.
func readExpected(path string) (map[string]expectedSkip, error) {
	out := map[string]expectedSkip{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%s:%d: want PACKAGE TEST REASON, with a reason: %q", path, n, line)
		}
		pkg := "github.com/antifailure/af"
		if fields[0] != "." {
			pkg += "/" + strings.TrimPrefix(fields[0], "./")
		}
		e := expectedSkip{Package: pkg, Name: fields[1], Reason: strings.Join(fields[2:], " ")}
		out[e.Package+" "+e.Name] = e
	}
	return out, sc.Err()
}

// outcome is what one test came to over the whole run.
type outcome struct {
	test       Test
	passed     bool
	failedIn   []string
	skippedIn  []string
	skipReason string
}

// summary is the whole run judged.
type summary struct {
	phases     []*Phase
	passed     int
	failed     []string
	deferred   int // skipped in one phase, passed in another
	expected   []string
	unexpected []string
	negative   counts
	problems   []string
	wall       float64 // from the first phase's start to the last one's end
}

func summarize(phases []*Phase, exp map[string]expectedSkip) *summary {
	s := &summary{phases: phases}
	byID := map[string]*outcome{}
	var ids []string
	if len(phases) > 0 {
		first, last := phases[0].Start, phases[0].Start
		for _, p := range phases {
			if end := p.Start.Add(time.Duration(p.Seconds * float64(time.Second))); end.After(last) {
				last = end
			}
		}
		s.wall = last.Sub(first).Seconds()
	}
	for _, p := range phases {
		if !p.OK {
			s.problems = append(s.problems, fmt.Sprintf("phase %s failed: %s", p.Name, strings.Join(p.Problems, "; ")))
		}
		if p.Negative {
			c := count(p.Tests)
			s.negative.passed += c.passed
			s.negative.failed += c.failed
			s.negative.skipped += c.skipped
			continue
		}
		for _, t := range p.Tests {
			o := byID[t.ID()]
			if o == nil {
				o = &outcome{test: t}
				byID[t.ID()] = o
				ids = append(ids, t.ID())
			}
			switch t.Action {
			case "pass":
				o.passed = true
			case "fail":
				o.failedIn = append(o.failedIn, p.Name)
			case "skip":
				o.skippedIn = append(o.skippedIn, p.Name)
				o.skipReason = t.Reason
			}
		}
	}
	for _, id := range ids {
		o := byID[id]
		name := short(o.test.Package) + " " + o.test.Name
		switch {
		case len(o.failedIn) > 0:
			s.failed = append(s.failed, fmt.Sprintf("%s (in %s)", name, strings.Join(o.failedIn, ", ")))
		case o.passed:
			s.passed++
			if len(o.skippedIn) > 0 {
				s.deferred++
			}
		default:
			if e, ok := exp[id]; ok {
				s.expected = append(s.expected, fmt.Sprintf("%s (%s)", name, e.Reason))
			} else {
				s.unexpected = append(s.unexpected, fmt.Sprintf("%s: %s (skipped in %s; run in no phase, and not in the list of expected skips)", name, o.skipReason, strings.Join(o.skippedIn, ", ")))
			}
		}
	}
	sort.Strings(s.failed)
	sort.Strings(s.expected)
	sort.Strings(s.unexpected)
	return s
}

func (s *summary) ok() bool {
	return len(s.problems) == 0 && len(s.failed) == 0 && len(s.unexpected) == 0
}

func (s *summary) print(w io.Writer, status int) {
	fmt.Fprintln(w, "== make test: the phases")
	for _, p := range s.phases {
		state := "ok"
		if !p.OK {
			state = "FAILED"
		}
		line := fmt.Sprintf("  %-34s %8s  %-6s", p.Name, dur(p.Seconds), state)
		if len(p.Tests) > 0 {
			c := count(p.Tests)
			line += fmt.Sprintf(" %5d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
			if p.Negative {
				line += " (a negative control: its failures were required, and judged by its reader)"
			}
		}
		fmt.Fprintln(w, line)
	}
	if s.deferred > 0 {
		fmt.Fprintf(w, "%d test(s) skipped in one phase (no cluster or daemon there) ran and passed in another\n", s.deferred)
	}
	if s.negative.passed+s.negative.failed+s.negative.skipped > 0 {
		fmt.Fprintf(w, "negative controls: %d test(s) failed as required, %d passed, %d skipped (not counted below)\n", s.negative.failed, s.negative.passed, s.negative.skipped)
	}
	for _, f := range s.failed {
		fmt.Fprintf(w, "FAILED: %s\n", f)
	}
	for _, u := range s.unexpected {
		fmt.Fprintf(w, "UNEXPECTED SKIP: %s\n", u)
	}
	for _, p := range s.problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	if status != 0 {
		fmt.Fprintf(w, "PROBLEM: the run stopped with exit status %d; the phases after it did not run\n", status)
	}
	fmt.Fprintf(w, "tests: %d passed, %d failed, %d skipped\n", s.passed, len(s.failed), len(s.expected)+len(s.unexpected))
	exp := "0 expected"
	if len(s.expected) > 0 {
		exp = fmt.Sprintf("%d expected: %s", len(s.expected), strings.Join(s.expected, "; "))
	}
	verdict := ""
	if !s.ok() || status != 0 {
		verdict = " FAILED"
	}
	fmt.Fprintf(w, "make test:%s %d passed, %d failed, %d unexpected skips (%s) in %s\n", verdict, s.passed, len(s.failed), len(s.unexpected), exp, dur(s.wall))
}
