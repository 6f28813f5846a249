package kubernetes

// The probe: one pod under exactly a service's rules, before any service image runs.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/manifest"
)

// probe runs the probe pod, reads its verdict and records it on the namespace. The pod is
// deleted, except when its verdict is contained and the watch is on: it then stays and checks
// again every r.opts.Watch (the environment's watch, read by Status).
func (r *Runtime) probe(ctx context.Context, t *target, e *env) (res0 *gate.Result, err0 error) {
	pods := t.c.cs.CoreV1().Pods(t.ns)
	if err := r.deletePod(ctx, t, ProbeName); err != nil {
		return nil, err
	}
	if _, err := pods.Create(ctx, e.probePod(r.opts.Watch), metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		if quotaRefused(err) {
			return nil, quotaFailure("the probe", err.Error())
		}
		return nil, apiError(t.c, "creating the probe pod", err)
	}
	defer func() {
		if err0 == nil && res0 != nil && res0.Verdict == gate.Contained && r.opts.Watch > 0 {
			r.progress(ctx).Printf("probe: stays as the environment's watch, checking every route again every %s (af status shows its last verdict)", r.opts.Watch)
			return
		}
		// Deleted, not waited for: nothing depends on its being gone (the next af up waits
		// for it before making a new one).
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		zero := int64(0)
		if err := pods.Delete(c, ProbeName, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			r.progress(ctx).Printf("could not delete the probe pod: %v", apiError(t.c, "deleting the probe pod", err))
		}
	}()
	r.progress(ctx).Printf("probe: trying every route out under the services' rules (public TCP, public DNS over UDP, metadata, API server, the IPv6 segment, the node)")
	deadline := time.Now().Add(r.opts.ProbeTimeout)
	pod, err := r.waitPodStarted(ctx, t, ProbeName, r.opts.ProbeTimeout)
	if err != nil {
		return nil, err
	}
	// The verdict is read as the probe writes it: the kubelet reports the container's end a
	// second or more later, and that adds nothing. Only without a verdict line is the end
	// waited for (its exit code says why).
	res, logs, found := r.followVerdict(ctx, t, time.Until(deadline))
	if !found {
		if pod, err = r.waitPodDone(ctx, t, ProbeName, max(time.Until(deadline), time.Second)); err != nil {
			return nil, err
		}
		logs, _ = r.podLog(ctx, t, ProbeName, "probe", false, 200)
		res, found = gate.ParseVerdict(logs)
	}
	if !found {
		reason := "the probe printed no verdict"
		if cs := terminated(pod, "probe"); cs != nil {
			reason += fmt.Sprintf(" (exit %d, %s)", cs.ExitCode, cs.Reason)
		}
		return nil, failure.Newf(failure.NotContained, "%s; last lines:\n%s", reason, failure.Indent(failure.LastLines(logs, 10))).
			WithHint("`af down` removes the namespace and its policies.")
	}
	r.recordProbe(ctx, t, &res)
	for _, a := range res.Routes {
		r.progress(ctx).Printf("probe: %-15s %-24s %-8s %6.0f ms  %s", a.Route, a.Target, a.Outcome, a.MS, a.Detail)
	}
	switch res.Verdict {
	case gate.Contained:
		r.progress(ctx).Printf("probe: contained (every route denied in %d rounds, %.0f ms, %.0f ms of it waiting for the sidecar to answer)", res.Rounds, res.MS, res.SidecarMS)
		return &res, nil
	case gate.Escape:
		return &res, failure.Newf(failure.NotContained, "the probe got out of namespace %s by %s; no service image was run", t.ns, escapeRoutes(res)).
			WithHint("The namespace and its policies remain, and the workloads written beside the probe wait at their gates and holds, their applications never started: `af down` removes them all.")
	default:
		return &res, failure.Newf(failure.NotContained, "the probe could not observe containment in namespace %s: %s; no service image was run", t.ns, res.Reason).
			WithHint("The namespace and its policies remain, and the workloads written beside the probe wait at their gates and holds, their applications never started: `af down` removes them all.")
	}
}

// escapeRoutes names the routes that got out: first those still open in the deciding round,
// then those that got out only in an earlier one (while the enforcer was still applying the
// namespace's policies: the startup window the gates close), so a refusal does not read as if
// every route it names were open now.
func escapeRoutes(res gate.Result) string {
	last := map[string]bool{}
	for _, a := range res.Routes {
		if a.Outcome == gate.Escaped {
			last[a.Route+" "+a.Target] = true
		}
	}
	var open, earlier []string
	for _, a := range res.Escaped {
		s := fmt.Sprintf("%s (%s)", a.Route, a.Target)
		if last[a.Route+" "+a.Target] {
			open = append(open, s)
		} else {
			earlier = append(earlier, s)
		}
	}
	out := strings.Join(open, ", ")
	if len(earlier) > 0 {
		if out != "" {
			out += "; "
		}
		out += "in an earlier round only, while the policies were being applied: " + strings.Join(earlier, ", ")
	}
	return out
}

// followVerdict follows the probe container's log until its verdict line (found), the log's
// end or the timeout, and returns the verdict with the last lines read.
func (r *Runtime) followVerdict(ctx context.Context, t *target, timeout time.Duration) (gate.Result, string, bool) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rc, err := t.c.cs.CoreV1().Pods(t.ns).GetLogs(ProbeName, &corev1.PodLogOptions{Container: "probe", Follow: true}).Stream(ctx)
	if err != nil {
		return gate.Result{}, "", false
	}
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if lines = append(lines, line); len(lines) > 200 {
			lines = lines[1:]
		}
		if strings.Contains(line, gate.VerdictMarker) {
			if res, ok := gate.ParseVerdict(line); ok {
				return res, strings.Join(lines, "\n"), true
			}
		}
	}
	return gate.Result{}, strings.Join(lines, "\n"), false
}

func (r *Runtime) recordProbe(ctx context.Context, t *target, res *gate.Result) {
	data, err := json.Marshal(res)
	if err != nil {
		return
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationProbe: string(data)}}})
	if _, err := t.c.cs.CoreV1().Namespaces().Patch(ctx, t.ns, "application/merge-patch+json", patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
		r.progress(ctx).Printf("could not record the probe verdict on namespace %s: %v", t.ns, err)
	}
}

// probePod runs `af probe` under exactly the labels and policies a service gets; with watch > 0
// it checks again every watch after a contained verdict.
func (e *env) probePod(watch time.Duration) *corev1.Pod {
	s := &manifest.Service{}
	spec := e.podSpec(ProbeName, s, nil, corev1.RestartPolicyNever, "")
	// The probe is the gate's check run as the pod's only container: no application image,
	// and no hold.
	probe := e.gate(corev1.ResourceRequirements{}, "")
	probe.Name = "probe"
	probe.Args = []string{"probe"}
	var annotations map[string]string
	if watch > 0 {
		probe.Args = append(probe.Args, "--watch", watch.String())
		annotations = map[string]string{AnnotationWatch: watch.String()}
	}
	spec.InitContainers = nil
	spec.Containers = []corev1.Container{probe}
	grace := int64(1)
	spec.TerminationGracePeriodSeconds = &grace
	labels := e.labels(RoleService, ProbeName)
	labels[LabelWorkload] = WorkloadProbe
	om := meta(ProbeName, e.Namespace, labels)
	om.Annotations = annotations
	return &corev1.Pod{ObjectMeta: om, Spec: spec}
}
