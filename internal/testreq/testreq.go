// Package testreq decides what a test does when something it needs is not there. On a
// developer's machine it skips, loudly (a line on standard error too, since go test hides the
// skips of passing packages). Under make test it is stricter: what make test always provides
// (a tool it installs, root, loopback IPv6) is a requirement, and a test without it fails
// (AF_TEST_STRICT=1); what make test provides only in some phases (the test cluster, the
// container daemon) is skipped where it is absent and required where the phase has the
// cluster (AF_TESTCLUSTER=1), and make test's reader fails the run unless every test skipped
// for it passed in another phase.
package testreq

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether make test runs the test (AF_TEST_STRICT=1).
func Strict() bool { return os.Getenv("AF_TEST_STRICT") == "1" }

// ClusterPhase reports whether the test runs in a phase that has the test cluster.
func ClusterPhase() bool { return os.Getenv("AF_TESTCLUSTER") == "1" }

// Missing handles the lack of something make test always provides: the test fails under make
// test and is skipped elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("REQUIRED under make test: %s", msg)
	}
	skip(t, msg)
}

// Elsewhere handles the lack of something make test provides only in its cluster phases:
// required there (under make test), skipped elsewhere.
func Elsewhere(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() && ClusterPhase() {
		t.Fatalf("REQUIRED in this phase of make test: %s", msg)
	}
	skip(t, msg)
}

// Tools requires each named command on PATH (Missing for each absent one).
func Tools(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			Missing(t, "%s is not installed (make test installs it)", n)
		}
	}
}

func skip(t testing.TB, msg string) {
	t.Helper()
	fmt.Fprintln(os.Stderr, "!!! "+t.Name()+": SKIPPED: "+msg)
	t.Skip("SKIPPED: " + msg)
}
