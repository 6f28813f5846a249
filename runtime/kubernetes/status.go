package kubernetes

// Status and Inventory: what runs, read off the cluster.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// Status reports each service's ready and desired instances, the size read off the running
// pods, the last exit code of a failed one, and the environment's probe verdict.
func (r *Runtime) Status(ctx context.Context, ref afruntime.Ref) (*afruntime.Status, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	st := &afruntime.Status{Environment: t.id, Namespace: t.ns, Services: []afruntime.ServiceStatus{}}
	ns, err := t.c.cs.CoreV1().Namespaces().Get(ctx, t.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return st, nil
	}
	if err != nil {
		return nil, apiError(t.c, "reading namespace "+t.ns, err)
	}
	if err := owned(&ns.ObjectMeta, ref.Repository); err != nil {
		return nil, err
	}
	st.Exists = true
	st.Repository = ns.Annotations[AnnotationRepository]
	if v, err := time.Parse(time.RFC3339, ns.Annotations[AnnotationExpiresAt]); err == nil {
		st.ExpiresAt = &v
	}
	if v := ns.Annotations[AnnotationProbe]; v != "" {
		var res gate.Result
		if json.Unmarshal([]byte(v), &res) == nil {
			st.Probe = &res
		}
	}
	if st.Quota, err = readQuota(ctx, t); err != nil {
		return nil, err
	}
	if st.Watch, err = r.readWatch(ctx, t); err != nil {
		return nil, err
	}
	deps, err := t.c.cs.AppsV1().Deployments(t.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + RoleService})
	if err != nil {
		return nil, apiError(t.c, "listing deployments", err)
	}
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + RoleService})
	if err != nil {
		return nil, apiError(t.c, "listing pods", err)
	}
	seen := map[string]bool{}
	for _, d := range deps.Items {
		name := d.Labels[LabelService]
		seen[name] = true
		s := afruntime.ServiceStatus{Name: name, Ready: int(d.Status.ReadyReplicas)}
		if d.Spec.Replicas != nil {
			s.Desired = int(*d.Spec.Replicas)
		}
		sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
		for i := range pods.Items {
			pod := &pods.Items[i]
			if !sel.Matches(labels.Set(pod.Labels)) || pod.DeletionTimestamp != nil {
				continue
			}
			readSize(&s, pod, name)
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name != name {
					continue
				}
				term := cs.State.Terminated
				if term == nil {
					term = cs.LastTerminationState.Terminated
				}
				if term != nil {
					code := int(term.ExitCode)
					s.ExitCode = &code
					s.Reason = term.Reason
				}
				if w := cs.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
					s.Reason = w.Reason
				}
			}
		}
		if svc := ref.Manifest.Services[name]; svc != nil && ref.Manifest.Runtime.Domain != "" && manifest.KindOf(svc) == "web" && svc.Port > 0 {
			if host, err := envid.PreviewHost(t.id, name, ref.Manifest.Runtime.Domain); err == nil {
				s.URL = r.opts.URLScheme + "://" + host + "/"
			}
		}
		switch {
		case s.Desired > 0 && s.Ready == s.Desired:
			s.State = afruntime.StateRunning
		case s.ExitCode != nil && *s.ExitCode != 0 || s.Reason == "CrashLoopBackOff" || strings.Contains(s.Reason, "Image"):
			s.State = afruntime.StateFailed
		default:
			s.State = afruntime.StateStarting
		}
		st.Services = append(st.Services, s)
	}
	for name := range ref.Manifest.Services {
		if !seen[name] {
			st.Services = append(st.Services, afruntime.ServiceStatus{Name: name, State: afruntime.StateAbsent})
		}
	}
	sort.Slice(st.Services, func(i, j int) bool { return st.Services[i].Name < st.Services[j].Name })
	return st, nil
}

// readSize takes the size of a running pod's service container: what the cluster runs, not
// what af sent.
func readSize(s *afruntime.ServiceStatus, pod *corev1.Pod, container string) {
	if pod.Status.Phase != corev1.PodRunning {
		return
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != container {
			continue
		}
		if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
			s.CPU = q.String()
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			s.Memory = q.String()
		}
	}
}

// Inventory lists every managed namespace and the objects af made in it.
func (r *Runtime) Inventory(ctx context.Context) ([]afruntime.Resource, error) {
	c, err := r.connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	nss, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true"})
	if err != nil {
		return nil, apiError(c, "listing namespaces", err)
	}
	var out []afruntime.Resource
	sel := metav1.ListOptions{LabelSelector: LabelManagedBy + "=af"}
	for _, ns := range nss.Items {
		env := ns.Labels[LabelEnvironment]
		out = append(out, afruntime.Resource{Kind: "Namespace", Name: ns.Name, Environment: env})
		for _, kind := range []struct {
			name string
			list func() ([]metav1.Object, error)
		}{
			{"NetworkPolicy", func() ([]metav1.Object, error) {
				l, err := c.cs.NetworkingV1().NetworkPolicies(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *networkingv1.NetworkPolicyList) []networkingv1.NetworkPolicy { return l.Items })
			}},
			{"Deployment", func() ([]metav1.Object, error) {
				l, err := c.cs.AppsV1().Deployments(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })
			}},
			{"Service", func() ([]metav1.Object, error) {
				l, err := c.cs.CoreV1().Services(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *corev1.ServiceList) []corev1.Service { return l.Items })
			}},
			{"Secret", func() ([]metav1.Object, error) {
				l, err := c.cs.CoreV1().Secrets(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *corev1.SecretList) []corev1.Secret { return l.Items })
			}},
			{"Job", func() ([]metav1.Object, error) {
				l, err := c.cs.BatchV1().Jobs(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *batchv1.JobList) []batchv1.Job { return l.Items })
			}},
			{"Pod", func() ([]metav1.Object, error) {
				l, err := c.cs.CoreV1().Pods(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *corev1.PodList) []corev1.Pod { return l.Items })
			}},
			{"ResourceQuota", func() ([]metav1.Object, error) {
				l, err := c.cs.CoreV1().ResourceQuotas(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *corev1.ResourceQuotaList) []corev1.ResourceQuota { return l.Items })
			}},
			{"LimitRange", func() ([]metav1.Object, error) {
				l, err := c.cs.CoreV1().LimitRanges(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *corev1.LimitRangeList) []corev1.LimitRange { return l.Items })
			}},
			{"Ingress", func() ([]metav1.Object, error) {
				l, err := c.cs.NetworkingV1().Ingresses(ns.Name).List(ctx, sel)
				return objects(l, err, func(l *networkingv1.IngressList) []networkingv1.Ingress { return l.Items })
			}},
		} {
			items, err := kind.list()
			if err != nil {
				return nil, apiError(c, fmt.Sprintf("listing %ss in %s", kind.name, ns.Name), err)
			}
			for _, o := range items {
				out = append(out, afruntime.Resource{Kind: kind.name, Namespace: ns.Name, Name: o.GetName(), Environment: env})
			}
		}
	}
	return out, nil
}

// objects returns the items of a typed list as metav1.Objects.
func objects[L any, T any, PT interface {
	*T
	metav1.Object
}](l L, err error, items func(L) []T) ([]metav1.Object, error) {
	if err != nil {
		return nil, err
	}
	list := items(l)
	out := make([]metav1.Object, len(list))
	for i := range list {
		out[i] = PT(&list[i])
	}
	return out, nil
}
