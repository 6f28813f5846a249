package verdict

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// Claim is what an accepted report shows.
type Claim struct {
	Passed       int      `json:"passed"`
	Skipped      []string `json:"skipped"`
	StartupProof bool     `json:"startup_proof"`
	Package      string   `json:"package"`
	SkipReasons  []string `json:"skip_reasons,omitempty"`
}

// String is the one line an accepted report earns.
func (c Claim) String() string {
	proof := "startup proof passed"
	if !c.StartupProof {
		proof = "startup proof missing"
	}
	return fmt.Sprintf("%d behaviours passed, %d skipped, %s", c.Passed, len(c.Skipped), proof)
}

// Refusal is a report the reader will not turn into a claim, with every reason.
type Refusal struct{ Reasons []string }

func (r *Refusal) Error() string {
	return fmt.Sprintf("the report proves nothing: %d reason(s):\n  - %s", len(r.Reasons), strings.Join(r.Reasons, "\n  - "))
}

// result is one test's outcome in a report.
type result struct {
	action string
	count  int
	output strings.Builder
}

// report is a `go test -json` stream of the suite, read.
type report struct {
	pkg           string
	results       map[string]*result // by test name within pkg
	reasons       []string           // what makes the stream unreadable as one run of the suite
	packageSeen   bool
	packagePassed bool
	other         map[string]bool // package + " " + test of tests of other packages
	negative      bool            // the run logged NegativeControlMarker
}

// read parses a report and checks what every verdict needs: one run of the root test and of
// the startup proof, each roster behaviour reached once, nothing foreign counted.
func read(r io.Reader, pkg string) (*report, error) {
	rep := &report{pkg: pkg, results: map[string]*result{}, other: map[string]bool{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var ev event
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			rep.reasons = append(rep.reasons, fmt.Sprintf("line %d is not a go test -json event: %v", line, err))
			continue
		}
		if ev.Package != pkg {
			if ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip") {
				rep.other[ev.Package+" "+ev.Test] = true
			}
			continue
		}
		if ev.Action == "output" && strings.Contains(ev.Output, NegativeControlMarker) {
			rep.negative = true
		}
		if ev.Test == "" {
			switch ev.Action {
			case "pass":
				rep.packageSeen, rep.packagePassed = true, true
			case "fail", "skip":
				rep.packageSeen = true
			}
			continue
		}
		res := rep.results[ev.Test]
		if res == nil {
			res = &result{}
			rep.results[ev.Test] = res
		}
		switch ev.Action {
		case "output":
			if res.output.Len() < 1<<20 {
				res.output.WriteString(ev.Output)
			}
		case "pass", "fail", "skip":
			res.count++
			res.action = ev.Action
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	if !rep.packageSeen {
		rep.reasons = append(rep.reasons, fmt.Sprintf("package %s has no result in the report (did it run?)", pkg))
	}
	switch root := rep.results[RootTest]; {
	case root == nil:
		rep.reasons = append(rep.reasons, fmt.Sprintf("the suite's root test %s did not run", RootTest))
	case root.count > 1:
		rep.reasons = append(rep.reasons, fmt.Sprintf("%s ran %d times (-count > 1 or a merged report): one run proves one run", RootTest, root.count))
	}
	var unmeasured []string
	for _, b := range Roster {
		switch res := rep.results[RootTest+"/"+b.Name]; {
		case res == nil || res.count == 0:
			unmeasured = append(unmeasured, b.Name)
		case res.count > 1:
			rep.reasons = append(rep.reasons, fmt.Sprintf("%s ran %d times", b.Name, res.count))
		}
	}
	if len(unmeasured) > 0 {
		rep.reasons = append(rep.reasons, fmt.Sprintf("%d roster behaviour(s) never reached, so unmeasured: %s", len(unmeasured), strings.Join(unmeasured, ", ")))
	}
	for name, res := range rep.results {
		if sub, ok := strings.CutPrefix(name, RootTest+"/"); ok && res.count > 0 && !inRoster(sub) {
			rep.reasons = append(rep.reasons, fmt.Sprintf("%s/%s is not a roster behaviour: the report is not of this suite", RootTest, sub))
		}
	}
	switch proof := rep.results[StartupProof]; {
	case proof == nil || proof.count == 0:
		rep.reasons = append(rep.reasons, fmt.Sprintf("the startup proof %s did not run", StartupProof))
	case proof.count > 1:
		rep.reasons = append(rep.reasons, fmt.Sprintf("the startup proof ran %d times", proof.count))
	}
	for key := range rep.other {
		_, test, _ := strings.Cut(key, " ")
		if test == RootTest || test == StartupProof || strings.HasPrefix(test, RootTest+"/") {
			rep.reasons = append(rep.reasons, fmt.Sprintf("%s: a test of that name ran in another package; it is not counted, and the report is refused", key))
		}
	}
	return rep, nil
}

// behaviour returns the result of one roster behaviour (nil when it did not run once).
func (rep *report) behaviour(name string) *result {
	if res := rep.results[RootTest+"/"+name]; res != nil && res.count == 1 {
		return res
	}
	return nil
}

func refuse(reasons []string) error {
	sort.Strings(reasons)
	return &Refusal{Reasons: reasons}
}

// Verify reads a `go test -json` stream of the suite run from package pkg and accepts it only
// when: every roster behaviour passed exactly once as a subtest of RootTest; the startup proof
// passed; no containment behaviour failed or was skipped; every other skip is of a behaviour
// that has a requirement, and says why; the package passed; no same-named test of another
// package is counted; nothing ran twice; and the runtime ran with its own containment checks
// (not a negative control's run).
func Verify(r io.Reader, pkg string) (*Claim, error) {
	rep, err := read(r, pkg)
	if err != nil {
		return nil, err
	}
	reasons := rep.reasons
	if rep.packageSeen && !rep.packagePassed {
		reasons = append(reasons, fmt.Sprintf("package %s did not pass", pkg))
	}
	if rep.negative {
		reasons = append(reasons, "the run is a negative control's ("+NegativeControlMarker+"): the runtime's own probe and gates were off, so it claims nothing for the runtime")
	}
	claim := &Claim{Package: pkg, Skipped: []string{}}
	for _, b := range Roster {
		res := rep.behaviour(b.Name)
		switch {
		case res == nil:
		case res.action == "pass":
			claim.Passed++
		case res.action == "fail":
			kind := "behaviour"
			if b.Containment {
				kind = "containment behaviour"
			}
			reasons = append(reasons, fmt.Sprintf("%s %s failed", kind, b.Name))
		case res.action == "skip" && b.Containment:
			reasons = append(reasons, fmt.Sprintf("containment behaviour %s was skipped; nothing may skip it", b.Name))
		case res.action == "skip" && b.Requires == Always:
			reasons = append(reasons, fmt.Sprintf("%s was skipped, but it requires nothing a runtime may lack", b.Name))
		case res.action == "skip":
			why := skipReason(res.output.String())
			if why == "" {
				reasons = append(reasons, fmt.Sprintf("%s was skipped without saying why", b.Name))
				continue
			}
			claim.Skipped = append(claim.Skipped, b.Name)
			claim.SkipReasons = append(claim.SkipReasons, b.Name+": "+why)
		}
	}
	if proof := rep.results[StartupProof]; proof != nil && proof.count == 1 {
		if proof.action != "pass" {
			reasons = append(reasons, fmt.Sprintf("the startup proof %s did not pass (%s)", StartupProof, proof.action))
		} else {
			claim.StartupProof = true
		}
	}
	if len(reasons) > 0 {
		return nil, refuse(reasons)
	}
	return claim, nil
}

// NegativeClaim is what a negative control's report shows when it holds: the behaviours that
// failed by an escape, and that everything else passed.
type NegativeClaim struct {
	Escaped []string `json:"escaped"` // the behaviours (and the startup proof) that failed by an escape
	Passed  int      `json:"passed"`  // every other behaviour, each passed
	Package string   `json:"package"`
}

// String is the one line a negative control that holds earns.
func (c NegativeClaim) String() string {
	return fmt.Sprintf("negative control holds: %d failed by an escape (%s), the other %d passed", len(c.Escaped), strings.Join(c.Escaped, ", "), c.Passed)
}

// RouteBehaviours are the behaviours that try routes out: what a cluster without an enforcer
// must fail, with the startup proof.
func RouteBehaviours() []string {
	var out []string
	for _, b := range Roster {
		if b.Route {
			out = append(out, b.Name)
		}
	}
	return append(out, StartupProof)
}

// VerifyRefusal reads the report of a negative control, a run on a cluster with known holes
// and the runtime's own containment checks off, and accepts it only when the run failed for
// exactly the reason it exists: each behaviour named in escapes (and the startup proof, when
// named) failed because a route got out, with an Escape line and no Broken one, and every
// other behaviour and the startup proof passed. A cluster broken in another way (pods that do
// not start, DNS down) fails behaviours without an escape, or fails the others, and is
// refused. Every name in escapes must route (Behaviour.Route) or be the startup proof.
func VerifyRefusal(r io.Reader, pkg string, escapes []string) (*NegativeClaim, error) {
	want := map[string]bool{}
	var bad []string
	for _, name := range escapes {
		ok := name == StartupProof
		for _, b := range Roster {
			if b.Name == name && b.Route {
				ok = true
			}
		}
		if !ok {
			bad = append(bad, name)
		}
		want[name] = true
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("not a behaviour that tries a route, nor the startup proof: %s", strings.Join(bad, ", "))
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("a negative control names the escapes it expects")
	}
	rep, err := read(r, pkg)
	if err != nil {
		return nil, err
	}
	reasons := rep.reasons
	if !rep.negative {
		reasons = append(reasons, "the run is not a negative control's (no "+NegativeControlMarker+" line): the runtime's own checks were on, so a failure says nothing about the suite's attempts")
	}
	claim := &NegativeClaim{Package: pkg, Escaped: []string{}}
	judge := func(name string, res *result) {
		if res == nil {
			return // read() gave the reason
		}
		out := res.output.String()
		switch {
		case want[name] && res.action != "fail":
			reasons = append(reasons, fmt.Sprintf("%s %s: a route it tries should have got out, and it did not fail", name, map[string]string{"pass": "passed", "skip": "was skipped"}[res.action]))
		case want[name] && !strings.Contains(out, Escape):
			reasons = append(reasons, fmt.Sprintf("%s failed, but not because a route got out (no %q line): %s", name, Escape, firstFailure(out)))
		case want[name] && strings.Contains(out, Broken):
			reasons = append(reasons, fmt.Sprintf("%s failed by an escape, and also could not measure: %s", name, lineWith(out, Broken)))
		case want[name]:
			claim.Escaped = append(claim.Escaped, name)
		case res.action == "fail":
			reasons = append(reasons, fmt.Sprintf("%s failed, and this negative control's holes do not explain it: %s", name, firstFailure(out)))
		case res.action == "skip" && skipReason(out) == "":
			reasons = append(reasons, fmt.Sprintf("%s was skipped without saying why", name))
		default:
			claim.Passed++
		}
	}
	for _, b := range Roster {
		judge(b.Name, rep.behaviour(b.Name))
	}
	if proof := rep.results[StartupProof]; proof != nil && proof.count == 1 {
		judge(StartupProof, proof)
	}
	if len(reasons) > 0 {
		return nil, refuse(reasons)
	}
	return claim, nil
}

// lineWith returns the first line of out that holds s, trimmed.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// firstFailure returns the line of a failed test's output that says why, for the refusal: the
// first of the suite's Broken lines, else its last file:line message (a failure ends a test).
func firstFailure(out string) string {
	if l := lineWith(out, Broken); l != "" {
		return l
	}
	last := "(no message)"
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.Contains(l, ".go:") && !strings.HasPrefix(l, "===") && !strings.HasPrefix(l, "---") {
			last = l
		}
	}
	return last
}

// inRoster reports whether a subtest of the root is a roster behaviour or one of its own
// nested subtests.
func inRoster(sub string) bool {
	for _, b := range Roster {
		if sub == b.Name || strings.HasPrefix(sub, b.Name+"/") {
			return true
		}
	}
	return false
}

// skipReason finds the reason a skipped test gave (the text after "SKIPPED:" or the output of
// t.Skip), empty when it gave none.
func skipReason(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if _, after, ok := strings.Cut(l, "SKIPPED:"); ok && strings.TrimSpace(after) != "" {
			return strings.TrimSpace(after)
		}
	}
	return ""
}
