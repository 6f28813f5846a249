package action

import (
	"errors"
	"strings"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
)

// Outside a job the command says what is missing, as a workflow annotation, and exits with
// the input code; the root prints nothing more.
func TestActionNamesTheMissingInput(t *testing.T) {
	r := cmdtest.Exec(t, cmdtest.Env{Vars: map[string]string{"INPUT_TOKEN": "t0ken-value"}}, NewCmdAction)
	var rep *factory.Reported
	if !errors.As(r.Err, &rep) || rep.Err.Exit() != failure.ExitInput || !errors.Is(r.Err, failure.ActionInputInvalid) {
		t.Fatalf("got %v, want a reported AF-GH-001", r.Err)
	}
	if !strings.Contains(r.Out, "::add-mask::t0ken-value") || !strings.Contains(r.Out, "::error::AF-GH-001: action input invalid: input kubeconfig") {
		t.Fatalf("output:\n%s", r.Out)
	}
}
