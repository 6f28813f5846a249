package logs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

// logged is a runtime that answers Logs with one line naming what it was asked.
type logged struct {
	*runtimetest.Fake
	got afruntime.LogOptions
}

func (l *logged) Observer() afruntime.Observer { return l }

func (l *logged) Sidecar(context.Context, afruntime.Ref) (*afruntime.Link, error) {
	return nil, fmt.Errorf("not asked of af logs")
}

func (l *logged) Service(context.Context, afruntime.Ref, string, int) (*afruntime.Link, error) {
	return nil, fmt.Errorf("not asked of af logs")
}

func (l *logged) Instances(context.Context, afruntime.Ref) ([]afruntime.Instance, error) {
	return nil, fmt.Errorf("not asked of af logs")
}

func (l *logged) Logs(_ context.Context, _ afruntime.Ref, o afruntime.LogOptions, w io.Writer) error {
	l.got = o
	fmt.Fprintf(w, "web-1 | hello from %s\n", o.Service)
	return nil
}

func TestLogs(t *testing.T) {
	rt := &logged{Fake: &runtimetest.Fake{}}
	r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdLogs, "web", "--env", "e", "--previous", "--since", "10m", "--tail", "20", "--gate")
	if r.Err != nil || r.Out != "web-1 | hello from web\n" {
		t.Fatalf("%v %q", r.Err, r.Out)
	}
	want := afruntime.LogOptions{Service: "web", Previous: true, Since: 10 * time.Minute, Tail: 20, Gate: true}
	if rt.got != want {
		t.Fatalf("asked %+v, want %+v", rt.got, want)
	}
	for _, bad := range [][]string{{"web", "--since", "soon"}, {"web", "--tail", "-1"}} {
		r := cmdtest.Exec(t, cmdtest.Env{Runtime: rt}, NewCmdLogs, append(bad, "--env", "e")...)
		if e := failure.As(r.Err); e == nil || e.Entry != failure.UsageInvalid {
			t.Errorf("%v: %v", bad, r.Err)
		}
	}
	r = cmdtest.Exec(t, cmdtest.Env{Runtime: &runtimetest.Fake{}}, NewCmdLogs, "web", "--env", "e")
	if e := failure.As(r.Err); e == nil || e.Entry != failure.RuntimeCannot || !strings.Contains(r.Err.Error(), "fake") {
		t.Fatalf("a runtime without logs: %v", r.Err)
	}
}
