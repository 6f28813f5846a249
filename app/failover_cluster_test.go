package app

import (
	"context"
	"github.com/antifailure/af/app/clusterstore"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/antifailure/af/github/report"
	afruntime "github.com/antifailure/af/runtime"
)

// haltingCluster starts a removal and never finishes it (the replica hangs, then dies):
// Down says it started and waits for its context.
type haltingCluster struct {
	Cluster
	started chan struct{}
}

func (h *haltingCluster) Down(ctx context.Context, ref afruntime.Ref) error {
	close(h.started)
	<-ctx.Done()
	return ctx.Err()
}

// Two replicas elect a leader with a real Lease; a closed delivery sent to the follower is
// recorded there and taken up by the leader, which dies in the middle of the teardown without
// giving the lease up. The other replica takes the lease once it has expired, resumes the
// record and finishes the teardown: the namespace gone, the comment rewritten, the deployment
// inactive, the journal empty. The failover is measured (from the leader's death to the
// namespace gone) and logged.
func TestAppFailover(t *testing.T) {
	fx := newClusterFixture(t)
	drain(t, fx.srv) // this test runs its own two replicas
	fx.s.preview(t, 110)
	fx.environment(t, "af-env-shop-pr-110", testRepo, 110, time.Time{}, true, 1)
	times := clusterstore.LeaseTimes{Duration: 4 * time.Second, RenewDeadline: 3 * time.Second, Retry: 500 * time.Millisecond, KeepOnCancel: true}
	replica := func(name string, c Cluster) (*Server, context.CancelFunc, <-chan struct{}) {
		srv, err := New(Config{Secret: secret, Cluster: c, GitHub: fx.s.gh, Journal: fx.journal, ReapInterval: time.Hour,
			ResumeInterval: 500 * time.Millisecond, Grace: 200 * time.Millisecond, Base: time.Second, Max: 5 * time.Second,
			Log: slog.New(slog.NewTextHandler(testLog{t}, nil)).With("replica", name),
			Lead: func(ctx context.Context, run func(context.Context)) error {
				return clusterstore.Lead(ctx, fx.rt, journalNS, "af-app", name, times, run)
			}})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := srv.Run(ctx, ln); err != nil {
				t.Logf("%s: %v", name, err)
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return srv, cancel, done
	}
	halting := &haltingCluster{Cluster: fx.rt, started: make(chan struct{})}
	a, killA, aDone := replica("replica-a", halting)
	waitFor(t, 30*time.Second, a.isLeader.Load)
	b, _, _ := replica("replica-b", fx.rt)
	time.Sleep(time.Second)
	if b.isLeader.Load() {
		t.Fatal("two leaders")
	}

	if code := post(t, b.Handler(), "c-110", fx.s.closed(t, 110, false)); code != http.StatusAccepted {
		t.Fatalf("the follower answered %d", code)
	}
	select {
	case <-halting.started:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader did not take up the teardown the follower recorded")
	}
	if b.isLeader.Load() || fx.gone("af-env-shop-pr-110") {
		t.Fatal("want replica-a leading, in the middle of the teardown")
	}
	killed := time.Now()
	killA()
	<-aDone
	waitFor(t, time.Minute, b.isLeader.Load)
	took := time.Since(killed)
	fx.waitGone(t, "af-env-shop-pr-110", 3*time.Minute)
	t.Logf("failover: replica-b led %s after replica-a died (lease %s); the namespace was gone %s after it",
		took.Round(100*time.Millisecond), times.Duration, time.Since(killed).Round(100*time.Millisecond))
	fx.gonePR(t, 110, report.ReasonClosed)
	waitFor(t, time.Minute, func() bool { r, err := fx.journal.List(context.Background()); return err == nil && len(r) == 0 })
}
