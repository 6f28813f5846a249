package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes/capacity"
)

// listPage is how many nodes or pods one list call returns.
const listPage = 500

// Preflight checks, before anything is created, that the environment's instances can fit the
// cluster's free capacity in some packing (AF-RUN-047 when they cannot). When the identity may
// not list nodes or pods it says so on the progress channel and lets the environment through.
func (r *Runtime) Preflight(ctx context.Context, spec afruntime.Spec) error {
	t, err := r.resolve(ctx, spec.Ref)
	if err != nil {
		return err
	}
	return r.preflight(ctx, t)
}

func (r *Runtime) preflight(ctx context.Context, t *target) error {
	instances := r.instances(t.m)
	asks := false
	for _, in := range instances {
		asks = asks || in.Size != (capacity.Size{})
	}
	tally := capacity.NewTally()
	skip := func(what string, err error) error {
		if apierrors.IsForbidden(err) {
			r.progress(ctx).Printf("capacity preflight skipped: context %q may not list %s (%v); the scheduler decides", t.c.context, what, apierrors.ReasonForError(err))
			return nil
		}
		return apiError(t.c, "listing "+what+" for the capacity preflight", err)
	}
	opts := metav1.ListOptions{Limit: listPage}
	for {
		nodes, err := t.c.cs.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return skip("nodes", err)
		}
		for i := range nodes.Items {
			tally.AddNode(&nodes.Items[i])
		}
		if opts.Continue = nodes.Continue; opts.Continue == "" {
			break
		}
	}
	opts = metav1.ListOptions{Limit: listPage, FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
	for {
		pods, err := t.c.cs.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return skip("pods", err)
		}
		for i := range pods.Items {
			tally.AddPod(&pods.Items[i])
		}
		if opts.Continue = pods.Continue; opts.Continue == "" {
			break
		}
	}
	free := tally.Free()
	excluded := ""
	if ex := tally.Excluded(); len(ex) > 0 {
		excluded = "; left out: " + strings.Join(ex, ", ")
	}
	if short := capacity.Check(free, instances); short != nil {
		return failure.New(failure.CapacityShort, short.Error()+excluded, short)
	}
	if asks {
		r.progress(ctx).Printf("capacity preflight: the environment can fit (%s%s); the scheduler decides", capacity.Describe(free), excluded)
	}
	return nil
}

// instances lists what the environment will run, each with what it requests: every replica,
// the sidecar, the probe and every migration.
func (r *Runtime) instances(m *manifest.Manifest) []capacity.Instance {
	e := &env{Manifest: m}
	sc := e.sidecarDeployment("")
	out := []capacity.Instance{
		{Service: "the sidecar", Size: capacity.Requests(&sc.Spec.Template.Spec), Concurrent: true},
		{Service: "the probe", Size: capacity.Size{}},
	}
	for _, name := range slices.Sorted(maps.Keys(m.Services)) {
		s := m.Services[name]
		size := capacity.FromList(size(s.Resources).Requests)
		for range max(s.Replicas, 1) {
			out = append(out, capacity.Instance{Service: name, Size: size, Concurrent: true})
		}
		if !s.Migrate.IsZero() {
			out = append(out, capacity.Instance{Service: fmt.Sprintf("the migration of %s", name), Size: size})
		}
	}
	return out
}
