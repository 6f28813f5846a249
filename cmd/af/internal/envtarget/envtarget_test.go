package envtarget

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
)

// The runtime reports from several goroutines at once (the sidecar's wait beside the probe):
// every line arrives whole, and under -race nothing races on the stream.
func TestProgressFromSeveralGoroutines(t *testing.T) {
	ios, _, _, errOut := iostreams.Test()
	p := Progress(factory.New(ios, func(string) string { return "" }))
	const writers, lines = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				p.Printf("writer %d line %d of a progress report long enough to be split", w, i)
			}
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	seen := map[string]bool{}
	for _, l := range got {
		var w, i int
		if _, err := fmt.Sscanf(l, "af: writer %d line %d of a progress report long enough to be split", &w, &i); err != nil || seen[l] {
			t.Fatalf("a line not whole or twice: %q (%v)", l, err)
		}
		seen[l] = true
	}
}

func TestProgressQuiet(t *testing.T) {
	ios, _, _, errOut := iostreams.Test()
	ios.SetQuiet(true)
	Progress(factory.New(ios, func(string) string { return "" })).Printf("nothing")
	if errOut.Len() != 0 {
		t.Errorf("-q printed %q", errOut.String())
	}
}
