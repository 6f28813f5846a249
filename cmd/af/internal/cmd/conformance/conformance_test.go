package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/failure"
)

func TestRosterAndVerify(t *testing.T) {
	r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdConformance, "roster", "--containment")
	var want []string
	for _, b := range verdict.Roster {
		if b.Containment {
			want = append(want, b.Name)
		}
	}
	if r.Err != nil || r.Out != strings.Join(want, "\n")+"\n" {
		t.Errorf("roster --containment: %v %q", r.Err, r.Out)
	}
	// A report with nothing in it proves nothing.
	empty := filepath.Join(t.TempDir(), "report.jsonl")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v := cmdtest.Exec(t, cmdtest.Env{}, NewCmdConformance, "verify", empty)
	if failure.CodeOf(v.Err) != failure.ConformanceRefused.Code {
		t.Errorf("verify of an empty report: %v", v.Err)
	}
}
