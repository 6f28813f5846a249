package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/gate"
)

const pollEvery = 250 * time.Millisecond

// heartbeat is how often a wait says it is still waiting.
const heartbeat = 5 * time.Second

// poll calls check until it reports done, fails, the timeout passes or ctx ends, and every
// heartbeat calls report (when not nil) with the time waited so far, from this same loop: what
// report reads was written by check on this goroutine, so nothing races. A timeout returns
// errTimeout; the caller turns it into the catalogue's words.
func poll(parent context.Context, timeout time.Duration, report func(elapsed time.Duration), check func() (bool, error)) error {
	return pollOn(parent, timeout, nil, report, check)
}

// pollOn is poll woken by ch: check runs at once when a watch sees a change, and every
// safetyEvery besides while all of ch's watches are open; every pollEvery otherwise (ch nil,
// or a watch not open).
func pollOn(parent context.Context, timeout time.Duration, ch *changes, report func(elapsed time.Duration), check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var wake chan struct{}
	if ch != nil {
		wake = ch.wake
	}
	start, beat, checked := time.Now(), time.Now(), time.Time{}
	due := true
	for {
		if due {
			checked = time.Now()
			done, err := check()
			if err != nil || done {
				return err
			}
		}
		if report != nil && time.Since(beat) >= heartbeat {
			beat = time.Now()
			report(time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err() // the caller gave up: not this wait's timeout
			}
			return errTimeout
		case <-wake:
			due = true
		case <-t.C:
			due = !ch.open() || time.Since(checked) >= safetyEvery
		}
	}
}

var errTimeout = errors.New("timed out")

// waitDeployment waits until every one of want instances of the Deployment is ready and
// current. It fails early on what will not get better (a crash loop, a gate that saw an
// escape) and on timeout says why, read off the pods.
func (r *Runtime) waitDeployment(ctx context.Context, t *target, name string, want int, timeout time.Duration) error {
	deps := t.c.cs.AppsV1().Deployments(t.ns)
	var ready int
	var fail error
	var sel map[string]string
	var why string           // what the pods say now, shown with each heartbeat
	var stuckSince time.Time // since when a quota refusal will not clear by waiting
	var refused string       // the quota's refusal of the instances, when there is one
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := apiWatches(wctx, deploymentAPIWatch(t, name), podsAPIWatch(t, metav1.ListOptions{}))
	err := pollOn(ctx, timeout, ch, func(el time.Duration) {
		if why != "" {
			r.progress(ctx).Printf("  %s: %d/%d ready (%s): %s", name, ready, want, el, why)
			return
		}
		r.progress(ctx).Printf("  %s: %d/%d ready (%s)", name, ready, want, el)
	}, func() (bool, error) {
		d, err := deps.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, apiError(t.c, "reading deployment "+name, err)
		}
		sel = d.Spec.Selector.MatchLabels
		ready = int(d.Status.ReadyReplicas)
		if d.Status.ObservedGeneration >= d.Generation && int(d.Status.UpdatedReplicas) == want &&
			ready == want && int(d.Status.Replicas) == want && int(d.Status.AvailableReplicas) == want {
			return true, nil
		}
		diag, err := r.diagnose(ctx, t, d.Spec.Selector.MatchLabels)
		if err != nil {
			return false, err
		}
		if diag.fatal != nil {
			fail = diag.fatal
			return true, nil
		}
		why = diag.why
		if refused = quotaRefusal(d); refused != "" {
			why = "instances refused by the namespace's quota: " + refused
			switch {
			case !r.quotaStuck(ctx, t, refused):
				stuckSince = time.Time{}
			case stuckSince.IsZero():
				stuckSince = time.Now()
			case time.Since(stuckSince) >= quotaPatience:
				fail = quotaFailure(deploymentWords(name), refused)
				return true, nil
			}
		}
		return false, nil
	})
	if fail != nil {
		return fail
	}
	if errors.Is(err, errTimeout) && refused != "" {
		return quotaFailure(deploymentWords(name), refused)
	}
	if errors.Is(err, errTimeout) {
		diag, derr := r.diagnose(ctx, t, sel)
		why := "no reason visible on the pods"
		if derr == nil && diag.why != "" {
			why = diag.why
		}
		return failure.Newf(failure.NotReady, "%s: %d of %d instances ready after %s: %s", name, ready, want, timeout, why)
	}
	if err == nil {
		r.progress(ctx).Printf("  %s: %d/%d ready", name, want, want)
	}
	return err
}

// diagnosis is what the pods of a workload say about why it is not ready.
type diagnosis struct {
	why   string // one line, for a timeout
	fatal error  // set when waiting longer cannot help
}

// diagnose reads the pods matching sel.
func (r *Runtime) diagnose(ctx context.Context, t *target, sel map[string]string) (diagnosis, error) {
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		return diagnosis{}, apiError(t.c, "listing pods", err)
	}
	var d diagnosis
	for i := range pods.Items {
		pod := &pods.Items[i]
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				d.why = fmt.Sprintf("pod %s cannot be scheduled: %s", pod.Name, c.Message)
			}
		}
		for _, cs := range pod.Status.InitContainerStatuses {
			if cs.Name != GateContainer {
				continue
			}
			if w := cs.State.Waiting; w != nil && isPullFailure(w.Reason) {
				d.why = fmt.Sprintf("pod %s: the gate's image %s cannot be pulled (%s: %s)", pod.Name, cs.Image, w.Reason, w.Message)
				d.fatal = pullFailed(r.withPullCause(ctx, t, pod))
			}
			term := cs.State.Terminated
			if term == nil {
				term = cs.LastTerminationState.Terminated
			}
			if term != nil && term.ExitCode != 0 {
				logs, _ := r.podLog(ctx, t, pod.Name, GateContainer, cs.State.Terminated == nil, 200)
				res, found := gate.ParseVerdict(logs)
				switch {
				case found && res.Verdict == gate.Escape:
					var routes []string
					for _, a := range res.Escaped {
						routes = append(routes, fmt.Sprintf("%s (%s)", a.Route, a.Target))
					}
					d.fatal = failure.Newf(failure.NotContained, "the gate of pod %s saw %s get out; the application was not started", pod.Name, strings.Join(routes, ", ")).
						WithHint("`af down` removes the environment.")
				case found:
					d.why = fmt.Sprintf("pod %s: the gate is not passing (exit %d, %s: %s)", pod.Name, term.ExitCode, res.Verdict, res.Reason)
				default:
					d.why = fmt.Sprintf("pod %s: the gate is not passing (exit %d)", pod.Name, term.ExitCode)
				}
			}
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && isPullFailure(w.Reason) {
				d.why = fmt.Sprintf("pod %s: image %s cannot be pulled (%s: %s)", pod.Name, cs.Image, w.Reason, w.Message)
				if f := pullFailed(r.withPullCause(ctx, t, pod)); f != nil {
					d.fatal = f
				}
			}
			term := cs.State.Terminated
			if term == nil {
				term = cs.LastTerminationState.Terminated
			}
			if term != nil && (cs.RestartCount >= 2 || pod.Spec.RestartPolicy == corev1.RestartPolicyNever) {
				logs, _ := r.podLog(ctx, t, pod.Name, cs.Name, cs.State.Terminated == nil, 200)
				d.fatal = failure.Newf(failure.ExitedDuringStart, "%s: the process exited with code %d (%s) and was restarted %d times; last lines:\n%s",
					pod.Name, term.ExitCode, term.Reason, cs.RestartCount, failure.Indent(failure.LastLines(logs, 10)))
			} else if term != nil {
				d.why = fmt.Sprintf("pod %s: the process exited with code %d (%s)", pod.Name, term.ExitCode, term.Reason)
			}
		}
		if d.why == "" && pod.Status.Phase == corev1.PodRunning {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status != corev1.ConditionTrue {
					d.why = fmt.Sprintf("pod %s is running but its readiness check does not pass", pod.Name)
				}
			}
		}
	}
	return d, nil
}

// waitPodDone waits until the pod has finished (Succeeded or Failed).
func (r *Runtime) waitPodDone(ctx context.Context, t *target, name string, timeout time.Duration) (*corev1.Pod, error) {
	return r.waitPod(ctx, t, name, timeout, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
}

// waitPodStarted waits until the pod's containers have started (or it has finished).
func (r *Runtime) waitPodStarted(ctx context.Context, t *target, name string, timeout time.Duration) (*corev1.Pod, error) {
	return r.waitPod(ctx, t, name, timeout, func(p *corev1.Pod) bool { return p.Status.Phase != corev1.PodPending && p.Status.Phase != "" })
}

// waitPod waits until done says the probe pod is where it should be.
func (r *Runtime) waitPod(ctx context.Context, t *target, name string, timeout time.Duration, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var pod *corev1.Pod
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	err := pollOn(ctx, timeout, apiWatches(wctx, podsAPIWatch(t, named(name))), func(el time.Duration) {
		phase := corev1.PodPhase("unknown")
		if pod != nil {
			phase = pod.Status.Phase
		}
		r.progress(ctx).Printf("  %s: %s (%s)", name, phase, el)
	}, func() (bool, error) {
		p, err := t.c.cs.CoreV1().Pods(t.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, apiError(t.c, "reading pod "+name, err)
		}
		pod = p
		if err := pullFailed(r.withPullCause(ctx, t, p)); err != nil {
			return false, err
		}
		return done(p), nil
	})
	if errors.Is(err, errTimeout) {
		why := ""
		if pod != nil {
			why = fmt.Sprintf(" (phase %s)", pod.Status.Phase)
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.State.Waiting != nil {
					why = fmt.Sprintf(" (%s: %s %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				}
			}
		}
		return pod, failure.Newf(failure.NotContained, "the probe pod did not finish within %s%s; containment could not be observed", timeout, why).
			WithHint("`af down` removes the namespace and its policies.")
	}
	return pod, err
}

// podState says in a few words what a pod is doing: not scheduled (and why), pending, or
// running.
func podState(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "not scheduled: " + c.Message
		}
	}
	if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
		return "pending"
	}
	return strings.ToLower(string(p.Status.Phase))
}

// waitJob waits for a migration Job to succeed or fail.
func (r *Runtime) waitJob(ctx context.Context, t *target, service, name string, timeout time.Duration) error {
	jobs := t.c.cs.BatchV1().Jobs(t.ns)
	var job *batchv1.Job
	// The Job's one pod says it is done before the job controller does (it batches pod updates
	// for a second or more), and its migration container's end says so before the pod's phase
	// does (the kubelet reports the phase a second or so later, once it has torn the pod down):
	// with backoffLimit 0, one completion and restartPolicy Never, that container's end is the
	// Job's.
	podSucceeded := false
	var stuckSince time.Time // since when a quota refusal of its pod will not clear by waiting
	var refused string       // the quota's refusal of its pod, when there is one
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := apiWatches(wctx, jobAPIWatch(t, name), podsAPIWatch(t, metav1.ListOptions{LabelSelector: "job-name=" + name}))
	state := "starting" // what its pod is doing, as the progress says it
	err := pollOn(ctx, timeout, ch, func(el time.Duration) {
		r.progress(ctx).Printf("  migration of %s: %s (%s)", service, state, el)
	}, func() (bool, error) {
		j, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, apiError(t.c, "reading job "+name, err)
		}
		job = j
		if jobDone(j, "Complete") || jobDone(j, "Failed") {
			return true, nil
		}
		pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil {
			return false, apiError(t.c, "listing the migration's pods", err)
		}
		refused = ""
		if len(pods.Items) == 0 {
			// No pod: the quota may refuse it (the Job says so only in an event).
			if refused = r.jobQuotaRefusal(ctx, t, name); refused != "" && r.quotaStuck(ctx, t, refused) {
				if stuckSince.IsZero() {
					stuckSince = time.Now()
				} else if time.Since(stuckSince) >= quotaPatience {
					return false, quotaFailure("the migration of "+service, refused)
				}
			} else {
				stuckSince = time.Time{}
			}
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			state = podState(p)
			if err := pullFailed(r.withPullCause(ctx, t, p)); err != nil {
				return false, err // an image that cannot be pulled: the migration never starts
			}
			if cs := terminated(p, service); cs != nil {
				podSucceeded = cs.ExitCode == 0
				return true, nil
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				podSucceeded = true
				return true, nil
			case corev1.PodFailed:
				return true, nil
			}
		}
		return false, nil
	})
	if errors.Is(err, errTimeout) && refused != "" {
		return quotaFailure("the migration of "+service, refused)
	}
	if errors.Is(err, errTimeout) {
		d, _ := r.diagnose(ctx, t, map[string]string{"job-name": name})
		return failure.Newf(failure.NotReady, "migration of %s (job %s) did not finish within %s: %s", service, name, timeout, d.why)
	}
	if err != nil {
		return err
	}
	if jobDone(job, "Complete") || podSucceeded {
		r.progress(ctx).Printf("  migration of %s: succeeded", service)
		return nil
	}
	// Failed: the exit code and the last lines of the one pod it ran.
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
	if err != nil {
		return apiError(t.c, "listing the migration's pods", err)
	}
	detail := "no pod of the job was found"
	for i := range pods.Items {
		pod := &pods.Items[i]
		if cs := terminated(pod, failedGate(pod)); cs != nil && cs.ExitCode != 0 {
			logs, _ := r.podLog(ctx, t, pod.Name, GateContainer, false, 200)
			res, _ := gate.ParseVerdict(logs)
			detail = fmt.Sprintf("the gate refused to start it (exit %d, %s); last lines:\n%s", cs.ExitCode, res.Verdict, failure.Indent(failure.LastLines(logs, 10)))
			continue
		}
		if cs := terminated(pod, service); cs != nil {
			logs, _ := r.podLog(ctx, t, pod.Name, service, false, 200)
			return failure.Newf(failure.MigrationFailed, "migration of %s (job %s) exited with code %d; last lines:\n%s", service, name, cs.ExitCode, failure.Indent(failure.LastLines(logs, 20)))
		}
	}
	return failure.Newf(failure.MigrationFailed, "migration of %s (job %s) failed: %s", service, name, detail)
}

// failedGate returns the gate's name when the pod's gate terminated with a failure, else "".
func failedGate(pod *corev1.Pod) string {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == GateContainer && cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
			return GateContainer
		}
	}
	return ""
}

func jobDone(j *batchv1.Job, cond batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == cond && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// terminated returns the container's terminated state, from init or main containers.
func terminated(pod *corev1.Pod, container string) *corev1.ContainerStateTerminated {
	if container == "" {
		return nil
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == container && cs.State.Terminated != nil {
				return cs.State.Terminated
			}
		}
	}
	return nil
}

// podLog returns up to tail lines of a container's log (previous: the last run's).
func (r *Runtime) podLog(ctx context.Context, t *target, pod, container string, previous bool, tail int64) (string, error) {
	req := t.c.cs.CoreV1().Pods(t.ns).GetLogs(pod, &corev1.PodLogOptions{Container: container, Previous: previous, TailLines: &tail})
	rc, err := req.Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	return string(b), err
}

// deletePod deletes a pod at once (no grace) and waits until it is gone.
func (r *Runtime) deletePod(ctx context.Context, t *target, name string) error {
	pods := t.c.cs.CoreV1().Pods(t.ns)
	zero := int64(0)
	return r.deleteAndWait(ctx, t, "pod", name, time.Minute,
		func() error { return pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) },
		func() error { _, err := pods.Get(ctx, name, metav1.GetOptions{}); return err })
}

// deleteJob deletes a Job and its pods and waits until it is gone.
func (r *Runtime) deleteJob(ctx context.Context, t *target, name string) error {
	jobs := t.c.cs.BatchV1().Jobs(t.ns)
	fg := metav1.DeletePropagationForeground
	return r.deleteAndWait(ctx, t, "job", name, 2*time.Minute,
		func() error { return jobs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}) },
		func() error { _, err := jobs.Get(ctx, name, metav1.GetOptions{}); return err })
}

// deleteAndWait deletes one object and polls get until it reports the object not found.
func (r *Runtime) deleteAndWait(ctx context.Context, t *target, kind, name string, timeout time.Duration, del, get func() error) error {
	err := del()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return apiError(t.c, "deleting "+kind+" "+name, err)
	}
	err = poll(ctx, timeout, nil, func() (bool, error) {
		err := get()
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, apiError(t.c, "reading "+kind+" "+name, err)
	})
	if errors.Is(err, errTimeout) {
		return failure.Newf(failure.TeardownIncomplete, "%s %s in %s was still there %s after it was deleted", kind, name, t.ns, timeout)
	}
	return err
}
