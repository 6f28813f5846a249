package app

// The intake: what the webhook hands a closed pull request's teardown to, on every replica. It
// records the teardown in the journal before the delivery is answered, so a crash after the
// 202 loses nothing; the leader's pool runs it, at once on the leader itself, else from the
// leader's next resume of the journal (Config.ResumeInterval).

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Intake is the webhook's Queue and Canceler over a pool and its journal.
type Intake struct {
	pool    *Pool
	leading atomic.Bool
	// Timeout bounds the journal's write (default 8s: GitHub waits 10s for the answer).
	Timeout time.Duration
}

// NewIntake returns the intake of pool, whose Journal must be set.
func NewIntake(pool *Pool) *Intake { return &Intake{pool: pool} }

// Lead says whether this replica's pool runs the teardowns it takes in.
func (in *Intake) Lead(leading bool) { in.leading.Store(leading) }

func (in *Intake) timeout() time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return 8 * time.Second
}

// Enqueue records t and, on the leader, queues it. An error (the journal could not be
// written) makes the delivery fail with 503, so GitHub's redelivery (or the operator's) can
// bring it again.
func (in *Intake) Enqueue(t Teardown) error {
	if t.Recorded.IsZero() {
		t.Recorded = in.pool.now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), in.timeout())
	defer cancel()
	if err := in.pool.Record(ctx, t); err != nil {
		return fmt.Errorf("recording the teardown before answering: %w", err)
	}
	if !in.leading.Load() {
		return nil // the leader's next resume takes it
	}
	return in.pool.Enqueue(t)
}

// Cancel forgets the pull request's waiting teardown: its record, and on the leader the
// queued one. A teardown running, or queued on another replica, reads the pull request's state
// before it removes anything, and finds it open.
func (in *Intake) Cancel(repository string, pullRequest int) error {
	ctx, cancel := context.WithTimeout(context.Background(), in.timeout())
	defer cancel()
	if in.pool.Journal != nil {
		if err := in.pool.Journal.Delete(ctx, key(Teardown{Repository: repository, PullRequest: pullRequest})); err != nil {
			return fmt.Errorf("deleting the teardown's record: %w", err)
		}
	}
	in.pool.Cancel(repository, pullRequest)
	return nil
}
