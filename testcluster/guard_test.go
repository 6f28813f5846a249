package testcluster_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestMain checks the guard after every test of the package has run, whatever -run, -shuffle
// or file order chose: no packet may have tried to leave the machine.
func TestMain(m *testing.M) {
	code := m.Run()
	if os.Getenv("AF_TESTCLUSTER") == "1" && os.Getenv("AF_TESTCLUSTER_DOWN") != "1" && code == 0 {
		if err := guardZero(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: after the package's tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// guardZero fails when a guard counter of the running cluster is not zero, or when the
// cluster cannot be opened to read them (TestMain does not call it in the after-down phase).
func guardZero() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := testcluster.Open(ctx)
	if err != nil {
		return fmt.Errorf("the guard cannot be read: %w", err)
	}
	counters, err := h.GuardCounters(ctx)
	if err != nil {
		return err
	}
	if len(counters) == 0 {
		return fmt.Errorf("the guard has no counters")
	}
	var bad []string
	for name, n := range counters {
		if n != 0 {
			bad = append(bad, fmt.Sprintf("%s = %d", name, n))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return fmt.Errorf("guard counters not zero (something tried to leave the machine): %v", bad)
	}
	return nil
}

// TestGuardCountersZero: the guard has its counters and none has counted a packet, now (the
// same check runs again after every test of the package, in TestMain).
func TestGuardCountersZero(t *testing.T) {
	cluster(t)
	if err := guardZero(); err != nil {
		t.Fatal(err)
	}
}
