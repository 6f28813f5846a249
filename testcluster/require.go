package testcluster

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Require returns the running test cluster for a test in any package, starting it if needed.
// Without AF_TESTCLUSTER=1 (make test sets it after starting the cluster) the test is skipped,
// loudly: a line on standard error as well as the skip message, because go test hides skips
// of passing packages.
func Require(t testing.TB) *Handle {
	t.Helper()
	if os.Getenv("AF_TESTCLUSTER") != "1" {
		msg := "SKIPPED: needs the real test cluster; make test starts it and sets AF_TESTCLUSTER=1 (or make test-cluster)"
		fmt.Fprintln(os.Stderr, "!!! "+t.Name()+": "+msg)
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	h, err := Ensure(ctx)
	if err != nil {
		t.Fatalf("test cluster: %v", err)
	}
	return h
}
