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

// Verify reads a `go test -json` stream of the suite run from package pkg and accepts it only
// when: every roster behaviour passed exactly once as a subtest of RootTest; the startup proof
// passed; no containment behaviour failed or was skipped; every other skip is of a behaviour
// that has a requirement, and says why; the package passed; no same-named test of another
// package is counted; nothing ran twice.
func Verify(r io.Reader, pkg string) (*Claim, error) {
	type result struct {
		action string
		count  int
		output strings.Builder
	}
	results := map[string]*result{} // key: test name within pkg
	var reasons []string
	packagePassed, packageSeen := false, false
	other := map[string]bool{}
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
			reasons = append(reasons, fmt.Sprintf("line %d is not a go test -json event: %v", line, err))
			continue
		}
		if ev.Package != pkg {
			if ev.Test != "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip") {
				other[ev.Package+" "+ev.Test] = true
			}
			continue
		}
		if ev.Test == "" {
			switch ev.Action {
			case "pass":
				packageSeen, packagePassed = true, true
			case "fail", "skip":
				packageSeen = true
			}
			continue
		}
		res := results[ev.Test]
		if res == nil {
			res = &result{}
			results[ev.Test] = res
		}
		switch ev.Action {
		case "output":
			res.output.WriteString(ev.Output)
		case "pass", "fail", "skip":
			res.count++
			res.action = ev.Action
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	if !packageSeen {
		reasons = append(reasons, fmt.Sprintf("package %s has no result in the report (did it run?)", pkg))
	} else if !packagePassed {
		reasons = append(reasons, fmt.Sprintf("package %s did not pass", pkg))
	}
	claim := &Claim{Package: pkg, Skipped: []string{}}
	root := results[RootTest]
	switch {
	case root == nil:
		reasons = append(reasons, fmt.Sprintf("the suite's root test %s did not run", RootTest))
	case root.count > 1:
		reasons = append(reasons, fmt.Sprintf("%s ran %d times (-count > 1 or a merged report): one run proves one run", RootTest, root.count))
	}
	var unmeasured []string
	for _, b := range Roster {
		res := results[RootTest+"/"+b.Name]
		switch {
		case res == nil || res.count == 0:
			unmeasured = append(unmeasured, b.Name)
		case res.count > 1:
			reasons = append(reasons, fmt.Sprintf("%s ran %d times", b.Name, res.count))
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
	if len(unmeasured) > 0 {
		reasons = append(reasons, fmt.Sprintf("%d roster behaviour(s) never reached, so unmeasured: %s", len(unmeasured), strings.Join(unmeasured, ", ")))
	}
	for name, res := range results {
		if sub, ok := strings.CutPrefix(name, RootTest+"/"); ok && res.count > 0 && !inRoster(sub) {
			reasons = append(reasons, fmt.Sprintf("%s/%s is not a roster behaviour: the report is not of this suite", RootTest, sub))
		}
	}
	switch proof := results[StartupProof]; {
	case proof == nil || proof.count == 0:
		reasons = append(reasons, fmt.Sprintf("the startup proof %s did not run", StartupProof))
	case proof.count > 1:
		reasons = append(reasons, fmt.Sprintf("the startup proof ran %d times", proof.count))
	case proof.action != "pass":
		reasons = append(reasons, fmt.Sprintf("the startup proof %s did not pass (%s)", StartupProof, proof.action))
	default:
		claim.StartupProof = true
	}
	for key := range other {
		_, test, _ := strings.Cut(key, " ")
		if test == RootTest || test == StartupProof || strings.HasPrefix(test, RootTest+"/") {
			reasons = append(reasons, fmt.Sprintf("%s: a test of that name ran in another package; it is not counted, and the report is refused", key))
		}
	}
	if len(reasons) > 0 {
		sort.Strings(reasons)
		return nil, &Refusal{Reasons: reasons}
	}
	return claim, nil
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
