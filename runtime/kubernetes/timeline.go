package kubernetes

import (
	"sync"
	"time"

	afruntime "github.com/antifailure/af/runtime"
)

// timeline records the phases of af up as they end, from several goroutines (services with no
// order between them start together).
type timeline struct {
	start  time.Time
	mu     sync.Mutex
	phases []afruntime.Phase
}

func newTimeline() *timeline { return &timeline{start: time.Now()} }

// done records the phase name that began at from and ends now. A nil timeline records nothing.
func (tl *timeline) done(name string, from time.Time) {
	if tl == nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.phases = append(tl.phases, afruntime.Phase{Name: name, Start: from.Sub(tl.start), Elapsed: time.Since(from)})
}

// list returns the phases in the order they began.
func (tl *timeline) list() []afruntime.Phase {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	out := append([]afruntime.Phase(nil), tl.phases...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Start < out[j-1].Start; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
