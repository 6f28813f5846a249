package app

import (
	"context"
	"testing"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

// noLister is a runtime that cannot find environments by their labels.
type noLister struct{ *runtimetest.Fake }

func (noLister) Lister() afruntime.Lister { return nil }

// noWatcher lists environments but keeps no watch.
type noWatcher struct{ *runtimetest.Fake }

func (noWatcher) Watcher() afruntime.Watcher { return nil }

// ClusterOf: the App's cluster is the runtime's Lister and Watcher beside its Down; a runtime
// that cannot list is refused (AF-RUN-044), one that keeps no watch reports it absent.
func TestClusterOf(t *testing.T) {
	ctx := context.Background()
	if _, err := ClusterOf(noLister{&runtimetest.Fake{}}); failure.CodeOf(err) != failure.RuntimeCannot.Code {
		t.Errorf("a runtime without a Lister: %v, want %s", err, failure.RuntimeCannot.Code)
	}

	f := &runtimetest.Fake{Envs: []afruntime.Environment{
		{ID: "shop-pr-1", Namespace: "af-env-shop-pr-1", Repository: "acme/shop", PullRequest: 1},
		{ID: "web-pr-2", Namespace: "af-env-web-pr-2", Repository: "acme/web", PullRequest: 2},
	}}
	c, err := ClusterOf(f)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := c.Environments(ctx, afruntime.Filter{Repository: "acme/web"})
	if err != nil || len(envs) != 1 || envs[0].ID != "web-pr-2" {
		t.Errorf("Environments(acme/web) = %v, %v; want web-pr-2 alone", envs, err)
	}
	if err := c.Down(ctx, afruntime.Ref{ID: "shop-pr-1", Namespace: "af-env-shop-pr-1"}); err != nil {
		t.Fatal(err)
	}
	if envs, _ := c.Environments(ctx, afruntime.Filter{}); len(envs) != 1 {
		t.Errorf("after Down through the cluster, %d environments listed, want 1", len(envs))
	}

	nw, err := ClusterOf(noWatcher{f})
	if err != nil {
		t.Fatal(err)
	}
	w, err := nw.Watch(ctx, afruntime.Ref{ID: "web-pr-2"})
	if err != nil || w.State != afruntime.WatchAbsent {
		t.Errorf("Watch without a Watcher = %+v, %v; want absent", w, err)
	}
}
