// Package clusterstore keeps what the App must share across its replicas and remember across
// their restarts in its own namespace, on the Kubernetes API of the cluster its runtime acts
// on: the teardown journal (Records, one ConfigMap per record) and the leadership (Lead, a
// coordination.k8s.io Lease). It is the App's, not the runtime's: no environment lives here.
package clusterstore

// Leadership: one of several replicas of a controller (the App) does the work that must be
// done once, holding a coordination.k8s.io Lease that it renews; when it stops renewing
// (killed, cut off from the API server) another takes the lease once it has expired.

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// API is the cluster the store keeps its objects on: client-go's clientset for it and a
// function that turns that API's errors into af's (naming the context and the server). The
// Kubernetes runtime provides it for its own cluster.
type API interface {
	API(ctx context.Context) (cs kubernetes.Interface, explain func(doing string, err error) error, err error)
}

// LeaseTimes shape a leadership: a lease not renewed for Duration is taken by another
// candidate; the leader gives it up when it could not renew within RenewDeadline; candidates
// try every Retry. Zero values take 15s, 10s and 2s (client-go's usual figures).
type LeaseTimes struct {
	Duration, RenewDeadline, Retry time.Duration
	// KeepOnCancel leaves the lease held when ctx ends, as a leader that dies leaves it (the
	// others wait for it to expire): tests make a crash with it.
	KeepOnCancel bool
}

// Lead runs run while identity holds the Lease name in namespace, and returns when ctx ends
// (the lease is given up at once, so a rollout hands it over without waiting for it to
// expire; unless KeepOnCancel) or when the leadership is lost (an error). run's context ends when either happens.
func Lead(ctx context.Context, api API, namespace, name, identity string, t LeaseTimes, run func(ctx context.Context)) error {
	if t.Duration <= 0 {
		t.Duration = 15 * time.Second
	}
	if t.RenewDeadline <= 0 {
		t.RenewDeadline = 10 * time.Second
	}
	if t.Retry <= 0 {
		t.Retry = 2 * time.Second
	}
	cs, _, err := api.API(ctx)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	started, finished := make(chan struct{}), make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   t.Duration,
		RenewDeadline:   t.RenewDeadline,
		RetryPeriod:     t.Retry,
		ReleaseOnCancel: !t.KeepOnCancel,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				close(started)
				defer close(finished)
				run(ctx)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("the lease %s/%s: %w", namespace, name, err)
	}
	// Run returns when ctx ends or, once leading, when a renewal failed (having cancelled
	// run's context); run goes on in its own goroutine, so it is waited for here.
	le.Run(ctx)
	select {
	case <-started:
		<-finished
	default:
		if ctx.Err() == nil {
			return errors.New("leader election ended before this replica led")
		}
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("the lease %s/%s could not be renewed within %s", namespace, name, t.RenewDeadline)
}
