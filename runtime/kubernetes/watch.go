package kubernetes

// The containment watch (not an API watch: apiwatch.go): the probe pod that stays after a contained verdict and checks every route again
// on a schedule. Only its own container writes its log, so its last verdict line is read from
// there: nothing in the namespace can forge it.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

// Watch reads the environment's containment as its probe sees it now. It reads; it never
// changes the environment.
func (r *Runtime) Watch(ctx context.Context, ref afruntime.Ref) (*afruntime.Watch, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.readWatch(ctx, t)
}

func (r *Runtime) readWatch(ctx context.Context, t *target) (*afruntime.Watch, error) {
	pod, err := t.c.cs.CoreV1().Pods(t.ns).Get(ctx, ProbeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return &afruntime.Watch{State: afruntime.WatchAbsent,
			Detail: "no probe pod: nothing checks containment while the environment runs (af up ran with AF_WATCH_INTERVAL=0, or the pod was removed); `af up` starts the watch again"}, nil
	}
	if err != nil {
		return nil, apiError(t.c, "reading the probe pod", err)
	}
	every, _ := time.ParseDuration(pod.Annotations[AnnotationWatch])
	w := &afruntime.Watch{EverySeconds: every.Seconds()}
	if every <= 0 {
		w.State, w.Detail = afruntime.WatchStarting, "the probe's first check is under way (af up is running), or it ran without the watch"
		return w, nil
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		w.State, w.Detail = afruntime.WatchStopped, "the probe's pod has ended: nothing checks containment now; `af up` starts the watch again"
		if cs := terminated(pod, "probe"); cs != nil {
			w.Detail = fmt.Sprintf("the probe's pod has ended (exit %d, %s): nothing checks containment now; `af up` starts the watch again", cs.ExitCode, cs.Reason)
		}
	}
	tail := int64(4) // a verdict line per check; a few in case the last one is being written
	logs, err := r.podLog(ctx, t, ProbeName, "probe", false, tail)
	if err != nil && w.State == "" {
		return nil, apiError(t.c, "reading the probe's log", err)
	}
	res, found := gate.ParseVerdict(logs)
	if found {
		w.Last = &res
		if !res.At.IsZero() {
			at := res.At
			w.At = &at
		}
	}
	if w.State != "" {
		return w, nil
	}
	now := r.opts.Now()
	switch {
	case !found:
		w.State, w.Detail = afruntime.WatchStarting, "the probe has printed no verdict yet"
	case w.At == nil || now.Sub(*w.At) > 2*every+gateDeadline(r.opts.GateEnv):
		w.State = afruntime.WatchStale
		w.Detail = fmt.Sprintf("no check since %s, though the probe checks every %s: its pod may be starved or its node gone; what it last saw is no longer known to hold", atString(w.At), every)
	default:
		w.State = res.Verdict
		switch res.Verdict {
		case gate.Contained:
			w.Detail = fmt.Sprintf("contained: every route denied at %s, checked every %s", atString(w.At), every)
		case gate.Escape:
			var routes []string
			for _, a := range res.Escaped {
				routes = append(routes, fmt.Sprintf("%s (%s)", a.Route, a.Target))
			}
			w.Detail = fmt.Sprintf("NOT CONTAINED: at %s the probe got out by %s; the services keep running: find what changed on the cluster (its NetworkPolicy enforcer, the namespace's policies), or remove the environment with `af down`", atString(w.At), strings.Join(routes, ", "))
		default:
			w.Detail = fmt.Sprintf("containment not observed at %s: %s", atString(w.At), res.Reason)
		}
	}
	return w, nil
}

func atString(t *time.Time) string {
	if t == nil {
		return "(no time)"
	}
	return t.UTC().Format(time.RFC3339)
}

// gateDeadline is the deadline of one check as the probe runs it (AF_GATE_DEADLINE, else 60s).
func gateDeadline(env map[string]string) time.Duration {
	if d, err := time.ParseDuration(env["AF_GATE_DEADLINE"]); err == nil && d > 0 {
		return d
	}
	return time.Minute
}
