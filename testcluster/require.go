package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testreq"
)

// Require returns the running test cluster for a test in any package, starting it if needed.
// Without AF_TESTCLUSTER=1 (make test sets it in the phases that have the cluster) the test
// is skipped, loudly; make test's reader then fails the run unless the test passed in one of
// those phases. With it, a cluster that cannot be had fails the test.
func Require(t testing.TB) *Handle {
	t.Helper()
	if !testreq.ClusterPhase() {
		testreq.Elsewhere(t, "needs the real test cluster; make test starts it and sets AF_TESTCLUSTER=1 (or make test-cluster)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	h, err := Ensure(ctx)
	if err != nil {
		t.Fatalf("test cluster: %v", err)
	}
	return h
}
