// Command testrun runs the phases of `make test` and judges them: every go test runs with
// -json through it, so a test that was not run cannot pass unseen.
//
//	testrun test [-expected FILE] [-stage lint,unit,integration] [-n]
//	    make test: the plan (plan.go) from the first phase to the last, stopping at the first
//	    that fails, the test cluster always taken down at the end, then the summary. -stage
//	    runs only those stages and no summary (make unit, make integration); -n prints the plan.
//	testrun go -phase NAME [-v] [-C DIR] -- GO-TEST-ARGS...
//	    go test -json GO-TEST-ARGS: the usual output (all of it with -v; else the package
//	    lines, build errors, the output of failed tests and each skip with its reason), then
//	    the phase's counts and time. It fails on a failed test or package, on nothing run, and
//	    on a -run alternative that matched no test (a renamed test).
//	testrun step -phase NAME [-report FILE [-negative]] -- COMMAND ARGS...
//	    a command that is not go test (lint, a cluster bring-up, a conformance run), timed;
//	    -report counts the tests of the go test -json report the command wrote, -negative
//	    marks them a negative control's (their failures were judged by the command).
//	testrun summary [-expected FILE] [-status N]
//	    every phase's time and counts, and the totals; fails on any failed phase or test, and
//	    on any skip that is neither listed in FILE with its reason nor run in another phase.
//	testrun reset
//	    forgets the phases recorded so far.
//
// Phases are recorded in AF_TEST_RESULTS (default bin/test-results), one JSON file each.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Phase is the record of one phase.
type Phase struct {
	Name     string    `json:"name"`
	Kind     string    `json:"kind"` // go or step
	Command  []string  `json:"command"`
	Start    time.Time `json:"start"`
	Seconds  float64   `json:"seconds"`
	OK       bool      `json:"ok"`
	Problems []string  `json:"problems,omitempty"`
	Negative bool      `json:"negative,omitempty"`
	Tests    []Test    `json:"tests,omitempty"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

func resultsDir() string {
	if d := os.Getenv("AF_TEST_RESULTS"); d != "" {
		return d
	}
	return filepath.Join("bin", "test-results")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	if len(args) == 0 {
		return 2, errors.New("usage: testrun test|go|step|summary|reset ...")
	}
	fs := flag.NewFlagSet("testrun "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	phase := fs.String("phase", "", "the phase's name")
	verbose := fs.Bool("v", false, "print every test's output as go test -v does")
	dir := fs.String("C", "", "run go test in this directory")
	report := fs.String("report", "", "step: a go test -json report the command writes, whose tests are counted")
	negative := fs.Bool("negative", false, "step: the report is a negative control's; its failures were judged by the command")
	expected := fs.String("expected", "", "summary, test: the checked-in list of expected skips")
	status := fs.Int("status", 0, "summary: the exit status of the run the summary closes")
	stage := fs.String("stage", "", "test: only these stages (lint, unit, integration; comma-separated), without the summary")
	dry := fs.Bool("n", false, "test: print the plan, run nothing")
	if err := fs.Parse(args[1:]); err != nil {
		return 2, err
	}
	rest := fs.Args()
	switch args[0] {
	case "go", "step":
		if *phase == "" || len(rest) == 0 {
			return 2, fmt.Errorf("usage: testrun %s -phase NAME -- ARGS...", args[0])
		}
		var p *Phase
		var err error
		if args[0] == "go" {
			p, err = runGo(ctx, *phase, *dir, *verbose, rest, nil, stdout)
		} else {
			p, err = runStep(ctx, *phase, *report, *negative, rest, nil, stdout)
		}
		if err != nil {
			return 2, err
		}
		if err := save(p); err != nil {
			return 2, err
		}
		printPhase(stdout, p)
		if !p.OK {
			return 1, nil
		}
		return 0, nil
	case "summary":
		phases, err := load(resultsDir())
		if err != nil {
			return 2, err
		}
		exp, err := readExpected(*expected)
		if err != nil {
			return 2, err
		}
		s := summarize(phases, exp)
		s.print(stdout, *status)
		if !s.ok() || *status != 0 {
			return 1, nil
		}
		return 0, nil
	case "test":
		return runTest(ctx, *stage, *expected, *dry, stdout)
	case "reset":
		if err := os.RemoveAll(resultsDir()); err != nil {
			return 2, err
		}
		return 0, os.MkdirAll(resultsDir(), 0o755)
	}
	return 2, fmt.Errorf("unknown command %q: test, go, step, summary or reset", args[0])
}

// runGo runs go test -json with the arguments and judges what it reports.
func runGo(ctx context.Context, name, dir string, verbose bool, args, env []string, out io.Writer) (*Phase, error) {
	alts, err := runFlag(args)
	if err != nil {
		return nil, err
	}
	p := &Phase{Name: name, Kind: "go", Command: append([]string{"go", "test", "-json"}, args...), Start: time.Now()}
	fmt.Fprintf(out, "== %s: %s\n", name, strings.Join(p.Command, " "))
	// go test's own messages and the reader's lines share the writer.
	out = &lockedWriter{w: out}
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-json"}, args...)...)
	cmd.Dir = dir
	cmd.Env = withEnv(env)
	cmd.Stderr = out
	cmd.WaitDelay = 10 * time.Second
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("go test: %w", err)
	}
	c := newCollector(out, verbose)
	readErr := c.read(pipe)
	waitErr := cmd.Wait()
	p.Seconds = time.Since(p.Start).Seconds()
	p.Tests = c.results()
	if readErr != nil {
		p.Problems = append(p.Problems, "reading go test's output: "+readErr.Error())
	}
	for _, pkg := range c.failedPackages() {
		p.Problems = append(p.Problems, "package "+pkg+" failed")
	}
	failed := 0
	for _, t := range p.Tests {
		if t.Action == "fail" {
			failed++
		}
	}
	if failed > 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%d test(s) failed", failed))
	}
	if waitErr != nil && len(p.Problems) == 0 {
		p.Problems = append(p.Problems, "go test: "+waitErr.Error())
	}
	if len(p.Tests) == 0 {
		p.Problems = append(p.Problems, "no test ran")
	}
	for _, re := range alts {
		if !matchedStarted(c.started, re) {
			p.Problems = append(p.Problems, fmt.Sprintf("-run alternative %s matched no test: a renamed or removed test is not run by make test", re))
		}
	}
	p.OK = len(p.Problems) == 0
	return p, nil
}

func matchedStarted(started map[string]bool, re *regexp.Regexp) bool {
	for key := range started {
		_, name, _ := strings.Cut(key, " ")
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// runFlag finds go test's -run pattern among the arguments and splits it.
func runFlag(args []string) ([]*regexp.Regexp, error) {
	var pattern string
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		a = strings.TrimPrefix(a, "test.")
		switch {
		case a == "run" && i+1 < len(args):
			pattern = args[i+1]
			i++
		case strings.HasPrefix(a, "run="):
			pattern = strings.TrimPrefix(a, "run=")
		}
	}
	if pattern == "" {
		return nil, nil
	}
	return runAlternatives(pattern)
}

// runStep runs a command that is not go test, timed, and counts the tests of its report.
func runStep(ctx context.Context, name, report string, negative bool, args, env []string, out io.Writer) (*Phase, error) {
	p := &Phase{Name: name, Kind: "step", Command: args, Start: time.Now(), Negative: negative}
	fmt.Fprintf(out, "== %s: %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, out, out
	cmd.Env = withEnv(env)
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	p.Seconds = time.Since(p.Start).Seconds()
	if err != nil {
		p.Problems = append(p.Problems, strings.Join(args, " ")+": "+err.Error())
	}
	if report != "" {
		f, ferr := os.Open(report)
		if ferr != nil {
			p.Problems = append(p.Problems, "the report: "+ferr.Error())
		} else {
			c := newCollector(io.Discard, false)
			if rerr := c.read(f); rerr != nil {
				p.Problems = append(p.Problems, "reading the report: "+rerr.Error())
			}
			f.Close()
			p.Tests = c.results()
			if len(p.Tests) == 0 {
				p.Problems = append(p.Problems, "the report "+report+" holds no test")
			}
			if err != nil {
				if failed := failedLeaves(p.Tests); len(failed) > 0 {
					p.Problems = append(p.Problems, "failed in its report: "+strings.Join(failed, "; "))
				}
			}
		}
	}
	p.OK = len(p.Problems) == 0
	return p, nil
}

// failedLeaves names the failed tests of a report that have no failed subtest, each with the
// reason it gave: what a failed step's summary says, so that a run's log names the behaviour a
// flaky negative control or conformance run tripped on.
func failedLeaves(tests []Test) []string {
	parent := map[string]bool{}
	for _, t := range tests {
		if t.Action != "fail" {
			continue
		}
		for n := t.Name; strings.Contains(n, "/"); {
			n = n[:strings.LastIndex(n, "/")]
			parent[t.Package+" "+n] = true
		}
	}
	var out []string
	for _, t := range tests {
		if t.Action != "fail" || parent[t.ID()] {
			continue
		}
		line := t.Name
		if t.Reason != "" {
			line += " (" + t.Reason + ")"
		}
		out = append(out, line)
	}
	return out
}

// withEnv is the process's environment with env added (nil: the process's as it is).
func withEnv(env []string) []string {
	if len(env) == 0 {
		return nil
	}
	return append(os.Environ(), env...)
}

// lockedWriter takes one write at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func save(p *Phase) error {
	dir := resultsDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%d-%s.json", p.Start.UnixNano(), strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '_'
		}
		return r
	}, p.Name))
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}

func load(dir string) ([]*Phase, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []*Phase
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var p Phase
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		out = append(out, &p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out, nil
}

// counts are a phase's or a run's numbers.
type counts struct{ passed, failed, skipped int }

func count(tests []Test) counts {
	var c counts
	for _, t := range tests {
		switch t.Action {
		case "pass":
			c.passed++
		case "fail":
			c.failed++
		case "skip":
			c.skipped++
		}
	}
	return c
}

func printPhase(w io.Writer, p *Phase) {
	state := "ok"
	if !p.OK {
		state = "FAILED"
	}
	c := count(p.Tests)
	tests := ""
	if len(p.Tests) > 0 {
		what := "passed"
		if p.Negative {
			what = "passed (of a negative control)"
		}
		tests = fmt.Sprintf(": %d %s, %d failed, %d skipped", c.passed, what, c.failed, c.skipped)
	}
	fmt.Fprintf(w, "== phase %s %s in %s%s\n", p.Name, state, dur(p.Seconds), tests)
	for _, t := range p.Tests {
		if t.Action == "skip" {
			fmt.Fprintf(w, "   skipped %s %s: %s\n", short(t.Package), t.Name, t.Reason)
		}
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "   PROBLEM: %s\n", pr)
	}
}

func dur(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	if d < time.Minute {
		return d.String()
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}

// short drops the module path from a package name.
func short(pkg string) string {
	const module = "github.com/antifailure/af"
	if pkg == module {
		return "."
	}
	return strings.TrimPrefix(pkg, module+"/")
}
