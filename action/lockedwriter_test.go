package action

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// The runtime's progress reaches the step's log from several goroutines at once: each line
// whole, and nothing races on the buffer (-race).
func TestLogfFromSeveralGoroutines(t *testing.T) {
	var buf bytes.Buffer
	r := &run{d: Deps{Out: &lockedWriter{w: &buf}}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				r.logf("waiting for the sidecar: 0 of 1 ready\n")
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if l != "af: waiting for the sidecar: 0 of 1 ready" {
			t.Fatalf("a line not whole: %q", l)
		}
	}
}
