package kubernetes

// One writer per environment: an af up holds the environment's writer Lease (af-writer, in its
// namespace) from the namespace step to its end. A second af up of the same environment waits
// while it is held, saying who holds it, and takes it once it is given up or no longer renewed;
// past its bound it refuses (AF-RUN-057). af down never waits: it removes the namespace, and
// the running up, which watches its namespace while it holds the lease, ends saying the
// environment was removed while it ran (AF-RUN-058), whatever step it was in. So a probe is
// only ever judged by the run that made it, and a removal is never reported as anything else.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/runtime/kubernetes/capacity"
)

// WriterLease is the Lease an af up holds in its environment's namespace.
const WriterLease = "af-writer"

// The writer lease's times: a holder renews every writerRenew; a lease whose record has not
// changed for writerDuration, by the waiting side's own clock (no trust in the holder's), is
// taken over; the namespace is checked every writerPoll while the lease is held.
const (
	writerDuration = 30 * time.Second
	writerRenew    = 10 * time.Second
	writerPoll     = 2 * time.Second
)

// DefaultWriterWait is how long an af up waits for another to give the environment up.
const DefaultWriterWait = 10 * time.Minute

var (
	errRemoved    = errors.New("the environment's namespace was deleted while af up ran")
	errWriterLost = errors.New("another run took the environment's writer lease")
)

// AnnotationRequests, on a writer lease, is what its run's environment asks of the nodes in
// all (CPU in millicores, memory in bytes: "cpu=1500 memory=268435456"): the capacity
// preflight of the runs that start after it counts it until its pods are placed.
const AnnotationRequests = "dev.antifailure.requests"

// writerHold is a held writer lease. ctx ends when the environment is removed or the lease
// lost (its cause says which), or when release is called.
type writerHold struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	done     chan struct{}
	t        *target
	identity string
	acquired time.Time // when it was taken, by this run's clock (written as the lease's acquireTime)
	once     sync.Once
}

// holdWriter takes the environment's writer lease for holder (who runs this up: a workflow
// run and its commit, or a user on a machine), waiting while another run holds it. An
// identity that may not read leases gets no hold (nil, and no error), said on the progress.
func (r *Runtime) holdWriter(ctx context.Context, t *target, holder string, requests capacity.Size) (*writerHold, error) {
	ann := map[string]string{AnnotationRequests: fmt.Sprintf("cpu=%d memory=%d", requests.MilliCPU, requests.Memory)}
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("af up (pid %d on %s)", os.Getpid(), host)
	}
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	identity := holder + " #" + hex.EncodeToString(nonce)
	leases := t.c.cs.CoordinationV1().Leases(t.ns)
	wait := r.opts.WriterWait
	start := r.opts.Now()
	p := r.progress(ctx)
	var (
		acquired time.Time
		seenRV   string    // the lease's record as last seen
		seenAt   time.Time // when it last changed, by this clock
		said     string
		saidAt   time.Time
		duration = int32(writerDuration / time.Second)
	)
	for {
		now := r.opts.Now()
		l, err := leases.Get(ctx, WriterLease, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			mt := metav1.NewMicroTime(now)
			_, err = leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: WriterLease, Labels: map[string]string{LabelManagedBy: "af"}, Annotations: ann},
				Spec:       coordinationv1.LeaseSpec{HolderIdentity: &identity, LeaseDurationSeconds: &duration, AcquireTime: &mt, RenewTime: &mt},
			}, metav1.CreateOptions{FieldManager: FieldManager})
			if apierrors.IsAlreadyExists(err) {
				continue // another took it first: judge it like any held lease
			}
			if err != nil {
				return nil, r.writerError(ctx, t, "taking the environment's writer lease", err)
			}
		case apierrors.IsForbidden(err):
			// An identity made before af held environments (an older deploy/ci): af goes on as
			// it did then, saying what it cannot keep out.
			p.Printf("context %q may not read leases in %s, so this run does not hold the environment: another af up of it at the same time is not kept out, nor an af down seen (apply deploy/ci/ of this version)", t.c.context, t.ns)
			return nil, nil
		case err != nil:
			return nil, r.writerError(ctx, t, "reading the environment's writer lease", err)
		default:
			if l.ResourceVersion != seenRV {
				seenRV, seenAt = l.ResourceVersion, now
			}
			other := ""
			if l.Spec.HolderIdentity != nil {
				other = *l.Spec.HolderIdentity
			}
			if other != "" && now.Sub(seenAt) < writerDuration {
				if now.Sub(start) >= wait {
					return nil, failure.Newf(failure.EnvironmentBusy, "environment %s is being brought up by %s%s; waited %s for it",
						t.id, other, since(l), wait.Round(time.Second))
				}
				if other != said || now.Sub(saidAt) >= 15*time.Second {
					p.Printf("environment %s is being brought up by %s%s: waiting for it (up to %s more)", t.id, other, since(l), (wait - now.Sub(start)).Round(time.Second))
					said, saidAt = other, now
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(writerPoll):
				}
				continue
			}
			if other != "" {
				p.Printf("environment %s: %s stopped renewing its hold %s ago; taking it over", t.id, other, now.Sub(seenAt).Round(time.Second))
				said = "" // said just now
			}
			mt := metav1.NewMicroTime(now)
			l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.AcquireTime, l.Spec.RenewTime = &identity, &duration, &mt, &mt
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[AnnotationRequests] = ann[AnnotationRequests]
			if _, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: FieldManager}); apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return nil, r.writerError(ctx, t, "taking the environment's writer lease", err)
			}
		}
		acquired = now
		break
	}
	if said != "" {
		p.Printf("environment %s: the other run is done; this one goes on (waited %s)", t.id, r.opts.Now().Sub(start).Round(time.Second))
	}
	wctx, cancel := context.WithCancelCause(ctx)
	w := &writerHold{ctx: wctx, cancel: cancel, done: make(chan struct{}), t: t, identity: identity, acquired: acquired}
	go w.keep(r)
	return w, nil
}

// since says when the lease was taken, when it says.
func since(l *coordinationv1.Lease) string {
	if l.Spec.AcquireTime == nil {
		return ""
	}
	return " since " + l.Spec.AcquireTime.UTC().Format(time.RFC3339)
}

// writerError is err, unless the namespace is gone or going: then the removal.
func (r *Runtime) writerError(ctx context.Context, t *target, doing string, err error) error {
	if gone, _ := namespaceGone(ctx, t); gone {
		return removedError(t)
	}
	return apiError(t.c, doing, err)
}

// keep renews the lease and watches the namespace until the hold ends.
func (w *writerHold) keep(r *Runtime) {
	defer close(w.done)
	leases := w.t.c.cs.CoordinationV1().Leases(w.t.ns)
	renewed := time.Now()
	tick := time.NewTicker(writerPoll)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		if gone, err := namespaceGone(w.ctx, w.t); err == nil && gone {
			w.cancel(errRemoved)
			return
		}
		if time.Since(renewed) < writerRenew {
			continue
		}
		l, err := leases.Get(w.ctx, WriterLease, metav1.GetOptions{})
		if err == nil {
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != w.identity {
				w.cancel(errWriterLost)
				return
			}
			mt := metav1.NewMicroTime(r.opts.Now())
			l.Spec.RenewTime = &mt
			if _, err = leases.Update(w.ctx, l, metav1.UpdateOptions{FieldManager: FieldManager}); err == nil {
				renewed = time.Now()
				continue
			}
		}
		if apierrors.IsNotFound(err) {
			w.cancel(errWriterLost)
			return
		}
		// A failed renewal is tried again at the next tick; only a lease not renewed for its
		// whole duration is lost (another run may take it by then).
		if time.Since(renewed) >= writerDuration-writerPoll {
			w.cancel(errWriterLost)
			return
		}
	}
}

// removed reports whether the environment was removed while the hold was held: the keeper saw
// it, or the namespace is gone or going now (a step may have failed on it first).
func (w *writerHold) removed() bool {
	if errors.Is(context.Cause(w.ctx), errRemoved) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
	defer cancel()
	gone, _ := namespaceGone(ctx, w.t)
	return gone
}

// release gives the lease up (deleting it only while it is still this run's) and stops the
// keeper. It is safe to call more than once.
func (w *writerHold) release() {
	w.once.Do(func() {
		w.cancel(nil)
		<-w.done
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 10*time.Second)
		defer cancel()
		leases := w.t.c.cs.CoordinationV1().Leases(w.t.ns)
		l, err := leases.Get(ctx, WriterLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != w.identity {
			return
		}
		_ = leases.Delete(ctx, WriterLease, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
	})
}

// namespaceGone reports whether the environment's namespace is deleted or being deleted.
func namespaceGone(ctx context.Context, t *target) (bool, error) {
	ns, err := t.c.cs.CoreV1().Namespaces().Get(ctx, t.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return ns.DeletionTimestamp != nil, nil
}

func removedError(t *target) error {
	return failure.Newf(failure.EnvironmentRemoved, "environment %s (namespace %s) was removed while af up ran (af down, the pull request closed, or the reaper)", t.id, t.ns)
}

// parseRequests reads a writer lease's AnnotationRequests; false when it holds none.
func parseRequests(v string) (capacity.Size, bool) {
	var s capacity.Size
	if _, err := fmt.Sscanf(v, "cpu=%d memory=%d", &s.MilliCPU, &s.Memory); err != nil {
		return capacity.Size{}, false
	}
	return s, true
}
