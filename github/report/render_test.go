package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./github/report -update to write it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func routes(escaped ...string) *gate.Result {
	res := &gate.Result{Verdict: gate.Contained, Rounds: 3, MS: 6040}
	for i, r := range []string{"tcp-public", "udp-dns", "metadata", "apiserver", "ipv6-link-local", "node-local"} {
		a := gate.Attempt{Route: r, Outcome: gate.Denied, Detail: "timed out | no answer", MS: float64(1000 + i)}
		for _, e := range escaped {
			if e == r {
				a.Outcome, a.Detail = gate.Escaped, "answered <200 OK>"
				res.Verdict = gate.Escape
				res.Escaped = append(res.Escaped, a)
			}
		}
		res.Routes = append(res.Routes, a)
	}
	return res
}

func facts(state string) *Facts {
	return &Facts{State: state, Environment: "shop-pr-7", Namespace: "af-env-shop-pr-7", Repository: "acme/shop", PullRequest: 7,
		Commit: "0123456789abcdef0123456789abcdef01234567", Duration: 27700 * time.Millisecond, RunURL: "https://github.com/acme/shop/actions/runs/77",
		At: time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)}
}

func TestRendering(t *testing.T) {
	ready := facts(Ready)
	ready.Probe = routes()
	ready.URLs = map[string]string{"web": "https://shop-pr-7-web.preview.af.test", "admin": "https://shop-pr-7-admin.preview.af.test"}
	ready.Services = []afruntime.ServiceStatus{{Name: "web", Ready: 1, Desired: 1, CPU: "100m", Memory: "64Mi", State: "running"}, {Name: "worker", Ready: 2, Desired: 2, State: "running"}}
	ready.LeftOut = []string{"host evil.test, every port: allow"}
	ready.Blocked = []BlockedHost{{Host: "tracker.ads.test", Port: 443, Rule: "default", Count: 3}, {Host: "evil.test", Count: 1}}

	escaped := facts(NotContained)
	escaped.Probe = routes("ipv6-link-local", "node-local")
	rep := failure.Newf(failure.NotContained, "the probe got out by ipv6-link-local, node-local; no service image was run").Report()
	escaped.Failure = &rep

	failed := facts(Failed)
	failed.Probe = routes()
	failed.Services = []afruntime.ServiceStatus{{Name: "web", Ready: 0, Desired: 1, State: "failed", Reason: "exit 1: missing DATABASE_URL"}}
	rep2 := failure.Newf(failure.ExitedDuringStart, "web exited with 1 before it became ready").Report()
	failed.Failure = &rep2

	gone := facts(Gone)
	gone.Reason = "the pull request was merged"

	skipped := facts(Skipped)
	skipped.Reason = "pull request #7 comes from a fork and does not carry the label af-preview."

	for name, f := range map[string]*Facts{"ready": ready, "not-contained": escaped, "failed": failed, "gone": gone, "skipped": skipped} {
		t.Run(name, func(t *testing.T) {
			c := Comment(f)
			if !strings.HasPrefix(c, Marker+"\n") {
				t.Fatalf("the comment does not start with the marker")
			}
			title, summary, _ := CheckOutput(f)
			golden(t, "comment-"+name, c)
			golden(t, "check-"+name, "conclusion: "+Conclusion(f)+"\ntitle: "+title+"\n\n"+summary)
		})
	}
	if got := ready.FirstURL(); got != "https://shop-pr-7-admin.preview.af.test" {
		t.Fatalf("FirstURL %q, want the first by name", got)
	}
}

func TestLimits(t *testing.T) {
	f := facts(Failed)
	long := strings.Repeat("x", 70000)
	rep := failure.Newf(failure.Internal, "%s", long).Report()
	f.Failure = &rep
	title, summary, _ := CheckOutput(f)
	if len(title) > 255 || len(summary) > 65000 {
		t.Fatalf("title %d, summary %d bytes: GitHub takes 255 and 65535", len(title), len(summary))
	}
}
