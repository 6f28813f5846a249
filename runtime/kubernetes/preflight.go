package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/kubernetes/capacity"
)

// listPage is how many nodes or pods one list call returns.
const listPage = 500

// Preflight checks, before anything is created, that the environment's instances can fit the
// cluster's free capacity in some packing (AF-RUN-047 when they cannot), beside what other
// environments being brought up will still ask for. When the identity may not list nodes or
// pods it says so on the progress channel and lets the environment through.
func (r *Runtime) Preflight(ctx context.Context, spec afruntime.Spec) error {
	t, err := r.resolve(ctx, spec.Ref)
	if err != nil {
		return err
	}
	return r.preflight(ctx, t, nil)
}

// preflight is Preflight for a resolved environment. mine is this run's writer lease once it
// holds one: then only the runs that took theirs first count (each run counts those before
// it, so of several started at once the first that fit pass and the others are refused);
// without it (before anything is created) every run going on counts.
func (r *Runtime) preflight(ctx context.Context, t *target, mine *writerHold) error {
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
	placed := map[string]capacity.Size{} // what each namespace's placed pods ask
	opts = metav1.ListOptions{Limit: listPage, FieldSelector: "status.phase!=Succeeded,status.phase!=Failed"}
	for {
		pods, err := t.c.cs.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return skip("pods", err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			tally.AddPod(p)
			if p.Spec.NodeName != "" {
				placed[p.Namespace] = placed[p.Namespace].Add(capacity.Requests(&p.Spec))
			}
		}
		if opts.Continue = pods.Continue; opts.Continue == "" {
			break
		}
	}
	others, err := r.runsGoingOn(ctx, t, mine, placed, tally)
	if err != nil {
		return err
	}
	free := tally.Free()
	excluded := ""
	if ex := tally.Excluded(); len(ex) > 0 {
		excluded = "; left out: " + strings.Join(ex, ", ")
	}
	if others != "" {
		excluded += "; " + others
	}
	if short := capacity.Check(free, instances); short != nil {
		return failure.New(failure.CapacityShort, short.Error()+excluded, short)
	}
	if asks {
		r.progress(ctx).Printf("capacity preflight: the environment can fit (%s%s); the scheduler decides", capacity.Describe(free), excluded)
	}
	return nil
}

// runsGoingOn reserves in tally what the other environments being brought up (their writer
// leases, live and, when mine is given, taken before it) still ask beyond what their placed
// pods hold, and says so ("" when none asks anything).
func (r *Runtime) runsGoingOn(ctx context.Context, t *target, mine *writerHold, placed map[string]capacity.Size, tally *capacity.Tally) (string, error) {
	leases, err := t.c.cs.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", WriterLease).String()})
	if apierrors.IsForbidden(err) {
		r.progress(ctx).Printf("capacity preflight: context %q may not list leases, so environments being brought up at the same time are not counted", t.c.context)
		return "", nil
	}
	if err != nil {
		return "", apiError(t.c, "listing the writer leases for the capacity preflight", err)
	}
	now := r.opts.Now()
	var names []string
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Namespace == t.ns || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
			now.Sub(l.Spec.RenewTime.Time) > 2*writerDuration {
			continue // this environment's own, given up, or its run died
		}
		if mine != nil && l.Spec.AcquireTime != nil {
			at := l.Spec.AcquireTime.Time
			if at.After(mine.acquired) || at.Equal(mine.acquired) && l.Namespace > t.ns {
				continue // taken after this run's: that run counts this one, not the other way
			}
		}
		asks, ok := parseRequests(l.Annotations[AnnotationRequests])
		if !ok {
			continue
		}
		if left := asks.Sub(placed[l.Namespace]); left.MilliCPU > 0 || left.Memory > 0 {
			tally.Reserve(left)
			names = append(names, l.Namespace)
		}
	}
	if len(names) == 0 {
		return "", nil
	}
	slices.Sort(names)
	res := tally.Reserved()
	return fmt.Sprintf("%d other environment(s) being brought up (%s) still ask %s CPU and %s memory", len(names), strings.Join(names, ", "),
		capacity.Format("cpu", res.MilliCPU), capacity.Format("memory", res.Memory)), nil
}

// asks is what the environment's concurrent instances ask in all: what its writer lease says
// to the runs that start after it.
func (r *Runtime) asks(m *manifest.Manifest) capacity.Size {
	var s capacity.Size
	for _, in := range r.instances(m) {
		if in.Concurrent {
			s = s.Add(in.Size)
		}
	}
	return s
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
