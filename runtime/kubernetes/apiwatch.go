package kubernetes

// API watches: Kubernetes watch requests on the objects a wait reads (pods, Deployments, Jobs,
// the namespace, the quota), so that it wakes when they change instead of polling. Not the
// environment's containment watch, which is the probe's (watch.go).

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
)

// safetyEvery is how often a wait whose watches are all open checks anyway: an event can be
// missed while a watch is being opened again.
const safetyEvery = 2 * time.Second

// changes wakes a wait when what it reads may have changed: one watch per kind of object it
// reads, each opened again when the API server ends it (and a check made at once, because
// what changed meanwhile has no event). The wait then reads what it needs as before, so a
// missed or coalesced event costs at most safetyEvery. While a watch is not open (the identity
// may not watch, the API server is away), the wait polls every pollEvery as it did without.
type changes struct {
	wake   chan struct{}
	closed atomic.Int32 // watches not open now
}

// opener opens one watch.
type opener func(ctx context.Context) (watch.Interface, error)

// apiWatches starts an API watch for each of opens until ctx ends.
func apiWatches(ctx context.Context, opens ...opener) *changes {
	c := &changes{wake: make(chan struct{}, 1)}
	c.closed.Store(int32(len(opens)))
	for _, open := range opens {
		go c.follow(ctx, open)
	}
	return c
}

// open reports whether every watch is open.
func (c *changes) open() bool { return c != nil && c.closed.Load() == 0 }

func (c *changes) signal() {
	select {
	case c.wake <- struct{}{}:
	default: // a wake is already pending: the check it causes reads this change too
	}
}

func (c *changes) follow(ctx context.Context, open opener) {
	for ctx.Err() == nil {
		w, err := open(ctx)
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsMethodNotSupported(err) {
				return // stays closed: the wait polls
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		c.closed.Add(-1)
		c.signal()
		c.drain(ctx, w)
		w.Stop()
		c.closed.Add(1)
	}
}

// drain wakes the wait on each event until the watch ends, fails or ctx ends.
func (c *changes) drain(ctx context.Context, w watch.Interface) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return
			}
			c.signal()
		}
	}
}

// named narrows a watch to one object by name.
func named(name string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
}

// The watches the waits open.

func podsAPIWatch(t *target, o metav1.ListOptions) opener {
	return func(ctx context.Context) (watch.Interface, error) { return t.c.cs.CoreV1().Pods(t.ns).Watch(ctx, o) }
}

func deploymentAPIWatch(t *target, name string) opener {
	return func(ctx context.Context) (watch.Interface, error) {
		return t.c.cs.AppsV1().Deployments(t.ns).Watch(ctx, named(name))
	}
}

func jobAPIWatch(t *target, name string) opener {
	return func(ctx context.Context) (watch.Interface, error) {
		return t.c.cs.BatchV1().Jobs(t.ns).Watch(ctx, named(name))
	}
}

func namespaceAPIWatch(t *target) opener {
	return func(ctx context.Context) (watch.Interface, error) {
		return t.c.cs.CoreV1().Namespaces().Watch(ctx, named(t.ns))
	}
}

func quotaAPIWatch(t *target, name string) opener {
	return func(ctx context.Context) (watch.Interface, error) {
		return t.c.cs.CoreV1().ResourceQuotas(t.ns).Watch(ctx, named(name))
	}
}
