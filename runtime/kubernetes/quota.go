package kubernetes

// The environment's ceilings as cluster objects, defence in depth behind the action's
// clamping (manifest/trust): a LimitRange that gives every container without a size the
// ceiling as its limit, and a ResourceQuota that holds the namespace to what its manifest can
// run at the ceilings. Both are named CeilingsName and written right after the namespace,
// before any pod. A pod over the quota is refused by the API server, whoever made it.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// CeilingsName names the environment's ResourceQuota and its LimitRange.
const CeilingsName = "af-ceilings"

// The sizes of af's own containers, and what a container that names no size requests.
const (
	sidecarCPURequest    = "50m"
	sidecarMemoryRequest = "64Mi"
	sidecarMemoryLimit   = "256Mi"
	defaultCPURequest    = "10m"
	defaultMemoryRequest = "16Mi"
)

// quotaSettle is how long af waits for the quota controller to take up a quota it wrote: until
// it has, the API server refuses every pod in the namespace ("status unknown for quota").
const quotaSettle = 30 * time.Second

// quotaPatience is how long a quota refusal that waiting cannot clear (quotaStuck) must
// last before af up fails: the quota controller's count of a pod just gone may lag a moment.
const quotaPatience = 5 * time.Second

// ceilings are the manifest's limits, parsed, with the defaults for what it leaves out.
type ceilings struct {
	replicas    int
	cpu, memory resource.Quantity
}

// ceilingsOf parses the manifest's limits; a field left out (a manifest not read through
// manifest.Parse) takes its default.
func ceilingsOf(l manifest.Limits) (ceilings, error) {
	d := manifest.Defaulted[manifest.Limits]()
	if l.Replicas <= 0 {
		l.Replicas = d.Replicas
	}
	if l.CPU == "" {
		l.CPU = d.CPU
	}
	if l.Memory == "" {
		l.Memory = d.Memory
	}
	cpu, err := l.CPU.Value()
	if err != nil {
		return ceilings{}, fmt.Errorf("limits.cpu: %w", err)
	}
	mem, err := l.Memory.Value()
	if err != nil {
		return ceilings{}, fmt.Errorf("limits.memory: %w", err)
	}
	return ceilings{replicas: l.Replicas, cpu: cpu, memory: mem}, nil
}

// defaultRequest is what a container that names no size requests: small, and never more than
// the ceiling it is limited to.
func (c ceilings) defaultRequest() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    minQuantity(resource.MustParse(defaultCPURequest), c.cpu),
		corev1.ResourceMemory: minQuantity(resource.MustParse(defaultMemoryRequest), c.memory),
	}
}

// sidecarResources is the sidecar's size: its requests, its memory limit, and the CPU limit
// the limit range would give it (the ceiling), never below its request.
func (c ceilings) sidecarResources() corev1.ResourceRequirements {
	req := resource.MustParse(sidecarCPURequest)
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: req, corev1.ResourceMemory: resource.MustParse(sidecarMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: maxQuantity(c.cpu, req), corev1.ResourceMemory: resource.MustParse(sidecarMemoryLimit)},
	}
}

// podSize is one pod's requests and limits, CPU and memory.
type podSize struct {
	reqCPU, reqMemory, limCPU, limMemory resource.Quantity
}

// atCeiling is the size a service's pod is counted at: each dimension the larger of the
// service's own and the ceiling, for requests and limits alike (its gate init container has
// the same size, so the pod's effective size is the application's).
func (c ceilings) atCeiling(s *manifest.Service) (podSize, error) {
	cpu, mem, err := ownSize(s)
	if err != nil {
		return podSize{}, err
	}
	cpu, mem = maxQuantity(cpu, c.cpu), maxQuantity(mem, c.memory)
	return podSize{reqCPU: cpu, reqMemory: mem, limCPU: cpu, limMemory: mem}, nil
}

// ownSize is the size the manifest names for a service (zero for a dimension it leaves out).
func ownSize(s *manifest.Service) (cpu, mem resource.Quantity, err error) {
	if s.Resources == nil {
		return cpu, mem, nil
	}
	if s.Resources.CPU != "" {
		if cpu, err = s.Resources.CPU.Value(); err != nil {
			return cpu, mem, err
		}
	}
	if s.Resources.Memory != "" {
		if mem, err = s.Resources.Memory.Value(); err != nil {
			return cpu, mem, err
		}
	}
	return cpu, mem, nil
}

// surge is how many instances more than r a rolling update of a service runs: af's service
// Deployments keep the default strategy, RollingUpdate with maxSurge 25%, rounded up.
func surge(r int) int { return (r + 3) / 4 }

// quotaHard is the environment's ResourceQuota, computed from the manifest:
//
//	for each service s:  R = max(s.replicas (1 if unset), limits.replicas)
//	                     pods(s) = R + surge(R) + (1 if s has a migration)
//	                     each counted at max(s's own size, limits.cpu / limits.memory)
//	                     surge(R) = ceil(R/4), the Deployment's default maxSurge of 25%
//	the sidecar:         1 pod (Recreate: never two), requests 50m/64Mi,
//	                     limits max(limits.cpu, 50m) / 256Mi
//	the probe:           1 pod, one container without a size: requests min(10m, limits.cpu) /
//	                     min(16Mi, limits.memory), limits limits.cpu / limits.memory
//
// and hard pods, requests.cpu, requests.memory, limits.cpu, limits.memory are the sums.
func quotaHard(m *manifest.Manifest, c ceilings) (corev1.ResourceList, error) {
	var sum podSize
	pods := 0
	add := func(n int, p podSize) {
		pods += n
		for _, f := range []struct{ to, q *resource.Quantity }{
			{&sum.reqCPU, &p.reqCPU}, {&sum.reqMemory, &p.reqMemory}, {&sum.limCPU, &p.limCPU}, {&sum.limMemory, &p.limMemory},
		} {
			q := f.q.DeepCopy()
			q.Mul(int64(n))
			f.to.Add(q)
		}
	}
	for name, s := range m.Services {
		size, err := c.atCeiling(s)
		if err != nil {
			return nil, fmt.Errorf("services.%s.resources: %w", name, err)
		}
		r := max(s.Replicas, 1, c.replicas)
		n := r + surge(r)
		if len(s.Migrate.Argv()) > 0 {
			n++
		}
		add(n, size)
	}
	sc := c.sidecarResources()
	add(1, podSize{reqCPU: sc.Requests[corev1.ResourceCPU], reqMemory: sc.Requests[corev1.ResourceMemory],
		limCPU: sc.Limits[corev1.ResourceCPU], limMemory: sc.Limits[corev1.ResourceMemory]})
	dr := c.defaultRequest()
	add(1, podSize{reqCPU: dr[corev1.ResourceCPU], reqMemory: dr[corev1.ResourceMemory], limCPU: c.cpu, limMemory: c.memory})
	return corev1.ResourceList{
		corev1.ResourcePods:           *resource.NewQuantity(int64(pods), resource.DecimalSI),
		corev1.ResourceRequestsCPU:    sum.reqCPU,
		corev1.ResourceRequestsMemory: sum.reqMemory,
		corev1.ResourceLimitsCPU:      sum.limCPU,
		corev1.ResourceLimitsMemory:   sum.limMemory,
	}, nil
}

// limitMax is the limit range's max: the ceiling, or more where a container af runs is larger,
// so af's own pods are never refused: the sidecar, and a service (with its gate and its
// migration) whose own size is over the ceiling, which only af up on a developer's machine
// sends (the action clamps it).
func limitMax(m *manifest.Manifest, c ceilings) (corev1.ResourceList, error) {
	sc := c.sidecarResources()
	cpu := maxQuantity(c.cpu, sc.Limits[corev1.ResourceCPU])
	mem := maxQuantity(c.memory, sc.Limits[corev1.ResourceMemory])
	for name, s := range m.Services {
		scpu, smem, err := ownSize(s)
		if err != nil {
			return nil, fmt.Errorf("services.%s.resources: %w", name, err)
		}
		cpu, mem = maxQuantity(cpu, scpu), maxQuantity(mem, smem)
	}
	return corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}, nil
}

// ceilingObjects are the environment's LimitRange and ResourceQuota.
func (e *env) ceilingObjects() (*corev1.LimitRange, *corev1.ResourceQuota, error) {
	hard, err := quotaHard(e.Manifest, e.Ceilings)
	if err != nil {
		return nil, nil, err
	}
	lmax, err := limitMax(e.Manifest, e.Ceilings)
	if err != nil {
		return nil, nil, err
	}
	lr := &corev1.LimitRange{
		ObjectMeta: meta(CeilingsName, e.Namespace, e.labels("ceilings", "")),
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: e.Ceilings.cpu, corev1.ResourceMemory: e.Ceilings.memory},
			DefaultRequest: e.Ceilings.defaultRequest(),
			Max:            lmax,
		}}},
	}
	q := &corev1.ResourceQuota{
		ObjectMeta: meta(CeilingsName, e.Namespace, e.labels("ceilings", "")),
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}
	return lr, q, nil
}

// ensureCeilings writes the LimitRange and the ResourceQuota and waits until the quota
// controller has taken the quota up. An identity that may not write them, or a cluster whose
// quota controller does not answer, is said on the progress channel and af goes on without
// them: they are defence in depth, never a reason a run fails.
func (r *Runtime) ensureCeilings(ctx context.Context, t *target, e *env) error {
	lr, q, err := e.ceilingObjects()
	if err != nil {
		return err
	}
	p := r.progress(ctx)
	if _, err := apply(ctx, t.c, t.c.cs.CoreV1().LimitRanges(t.ns), "v1", "LimitRange", lr.Name, lr); err != nil {
		if forbidden(err) {
			p.Printf("ceilings: may not write LimitRange %s (%v); containers without a size run unlimited", lr.Name, err)
			return nil
		}
		return err
	}
	if _, err := apply(ctx, t.c, t.c.cs.CoreV1().ResourceQuotas(t.ns), "v1", "ResourceQuota", q.Name, q); err != nil {
		if forbidden(err) {
			p.Printf("ceilings: may not write ResourceQuota %s (%v); the namespace runs without a quota", q.Name, err)
			return nil
		}
		return err
	}
	if err := r.waitQuota(ctx, t, q.Spec.Hard); err != nil {
		if !errors.Is(err, errTimeout) {
			return err
		}
		// Until the controller fills its status, the API server refuses every pod.
		_ = t.c.cs.CoreV1().ResourceQuotas(t.ns).Delete(ctx, q.Name, metav1.DeleteOptions{})
		p.Printf("ceilings: the cluster's quota controller did not take up ResourceQuota %s within %s; it is removed and the namespace runs without a quota", q.Name, quotaSettle)
		return nil
	}
	p.Printf("ceilings: LimitRange %s (default %s CPU, %s memory per container) and ResourceQuota %s (%s)",
		lr.Name, e.Ceilings.cpu.String(), e.Ceilings.memory.String(), q.Name, hardString(q.Spec.Hard))
	return nil
}

// waitQuota waits until the quota's status holds hard: the quota controller has counted the
// namespace against it. Until then the API server refuses every pod in the namespace.
func (r *Runtime) waitQuota(ctx context.Context, t *target, hard corev1.ResourceList) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	return pollOn(ctx, quotaSettle, apiWatches(wctx, quotaAPIWatch(t, CeilingsName)), nil, func() (bool, error) {
		q, err := t.c.cs.CoreV1().ResourceQuotas(t.ns).Get(ctx, CeilingsName, metav1.GetOptions{})
		if err != nil {
			return false, apiError(t.c, "reading ResourceQuota "+CeilingsName, err)
		}
		for k, want := range hard {
			got, ok := q.Status.Hard[k]
			if _, counted := q.Status.Used[k]; !ok || !counted || got.Cmp(want) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
}

// forbidden says whether err is the API server's refusal of af's identity.
func forbidden(err error) bool { return apierrors.IsForbidden(err) }

// hardString writes a quota's figures in a fixed order.
func hardString(l corev1.ResourceList) string {
	var parts []string
	for _, k := range []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory} {
		if q, ok := l[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", k, q.String()))
		}
	}
	return strings.Join(parts, " ")
}

// readQuota reads the environment's quota for status: used and hard for pods, limits.cpu and
// limits.memory. Nil when there is none, or af may not read it.
func readQuota(ctx context.Context, t *target) (*afruntime.Quota, error) {
	q, err := t.c.cs.CoreV1().ResourceQuotas(t.ns).Get(ctx, CeilingsName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || forbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError(t.c, "reading ResourceQuota "+CeilingsName, err)
	}
	fig := func(k corev1.ResourceName) afruntime.QuotaFigure {
		hard, ok := q.Status.Hard[k]
		if !ok {
			hard = q.Spec.Hard[k]
		}
		used := q.Status.Used[k]
		return afruntime.QuotaFigure{Used: used.String(), Hard: hard.String()}
	}
	return &afruntime.Quota{Pods: fig(corev1.ResourcePods), CPU: fig(corev1.ResourceLimitsCPU), Memory: fig(corev1.ResourceLimitsMemory)}, nil
}

func maxQuantity(a, b resource.Quantity) resource.Quantity {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

func minQuantity(a, b resource.Quantity) resource.Quantity {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}

// quotaRefusal is the API server's refusal of a Deployment's pods for the environment's quota,
// as its ReplicaSet reported it (a ReplicaFailure condition, reason FailedCreate); "" when
// there is none.
func quotaRefusal(d *appsv1.Deployment) string {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue && c.Reason == "FailedCreate" &&
			strings.Contains(c.Message, "exceeded quota: "+CeilingsName) {
			return c.Message
		}
	}
	return ""
}

// quotaStuck says whether a quota refusal (the API server's message) will not clear by
// waiting: nothing in the namespace is on its way out (a pod terminating, a migration or the
// probe still running), and what the refused pod asked for still does not fit what the quota
// has left now. A refusal that would fit now is the ReplicaSet controller's back-off: it
// retries. When it cannot tell (a message without figures, a read refused) it says no, and af
// waits as it did before.
func (r *Runtime) quotaStuck(ctx context.Context, t *target, msg string) bool {
	requested := quotaRequested(msg)
	if len(requested) == 0 {
		return false
	}
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, p := range pods.Items {
		// The probe finishes unless it is the watch, which stays (its slot is in the quota).
		finishing := p.Labels[LabelWorkload] == WorkloadMigration ||
			p.Labels[LabelWorkload] == WorkloadProbe && p.Annotations[AnnotationWatch] == ""
		if p.DeletionTimestamp != nil || finishing && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return false
		}
	}
	q, err := t.c.cs.CoreV1().ResourceQuotas(t.ns).Get(ctx, CeilingsName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for k, want := range requested {
		used, hard := q.Status.Used[k], q.Status.Hard[k]
		used.Add(want)
		if used.Cmp(hard) > 0 {
			return true
		}
	}
	return false
}

// quotaRequested reads what a refused pod asked for off the API server's message:
// "... exceeded quota: af-ceilings, requested: limits.cpu=2,pods=1, used: ..., limited: ...".
func quotaRequested(msg string) corev1.ResourceList {
	_, rest, ok := strings.Cut(msg, "requested: ")
	if !ok {
		return nil
	}
	list, _, ok := strings.Cut(rest, ", used: ")
	if !ok {
		return nil
	}
	out := corev1.ResourceList{}
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if q, err := resource.ParseQuantity(v); ok && err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}

// quotaRefused says whether err is the API server's refusal of a pod for the environment's
// quota.
func quotaRefused(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: "+CeilingsName)
}

// quotaFailure is a workload whose pods the quota refuses (what names it: "service web",
// "the sidecar"): af up fails at once instead of waiting out its timeout.
func quotaFailure(what, msg string) error {
	return failure.Newf(failure.NotReady, "%s cannot start: the API server refuses its pods for the environment's ResourceQuota %s: %s", what, CeilingsName, msg).
		WithHint("The quota is made from the base branch's af.yaml limits (replicas, cpu, memory): raise them there, or lower this service's replicas or resources. `af status` shows the quota's use; something else running in the namespace counts too.")
}

// deploymentWords names a Deployment af waits for: the sidecar, or a service.
func deploymentWords(name string) string {
	if name == SidecarName {
		return "the sidecar"
	}
	return "service " + name
}

// jobQuotaRefusal is the API server's latest refusal of a Job's pod for the environment's
// quota, read off the Job's FailedCreate events (a Job has no condition for it); "" when there
// is none or the events cannot be read.
func (r *Runtime) jobQuotaRefusal(ctx context.Context, t *target, job string) string {
	evs, err := t.c.cs.CoreV1().Events(t.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + job + ",reason=FailedCreate"})
	if err != nil {
		return ""
	}
	msg, last := "", time.Time{}
	for _, e := range evs.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if strings.Contains(e.Message, "exceeded quota: "+CeilingsName) && !at.Before(last) {
			msg, last = e.Message, at
		}
	}
	return msg
}
