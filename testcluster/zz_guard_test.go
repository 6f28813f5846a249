package testcluster_test

import (
	"testing"
	"time"
)

// TestGuardCountersZero runs last in this package (file order): after every
// other test, the guard must not have dropped a single packet.
func TestGuardCountersZero(t *testing.T) {
	h := cluster(t)
	counters, err := h.GuardCounters(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(counters) == 0 {
		t.Fatal("the guard has no counters")
	}
	for name, n := range counters {
		t.Logf("guard counter %s = %d", name, n)
		if n != 0 {
			t.Errorf("guard counter %s = %d, want 0: something tried to leave the machine", name, n)
		}
	}
}
