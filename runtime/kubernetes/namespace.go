package kubernetes

// The environment's namespace: created with af's labels in one call, reused only when af made
// it for this repository; and the cluster resolver the sidecar asks about the environment's names.

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// ensureNamespace creates the namespace with its labels in one call, or reuses it when af made
// it for this repository; anything else is refused untouched.
func (r *Runtime) ensureNamespace(ctx context.Context, t *target, spec afruntime.Spec) (created bool, err error) {
	nss := t.c.cs.CoreV1().Namespaces()
	for attempt := 0; ; attempt++ {
		ns, err := nss.Get(ctx, t.ns, metav1.GetOptions{})
		if err == nil {
			if err := owned(&ns.ObjectMeta, spec.Repository); err != nil {
				return false, err
			}
			if ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
				return false, failure.Newf(failure.StillTerminating, "namespace %s is being deleted (since %s)", t.ns, ns.DeletionTimestamp.Format(time.RFC3339))
			}
			r.progress(ctx).Printf("namespace %s exists and is af's: reusing it", t.ns)
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, apiError(t.c, "reading namespace "+t.ns, err)
		}
		var exp time.Time
		if ttl, err := t.m.Runtime.TTL.Value(); err == nil && ttl > 0 {
			exp = r.opts.Now().Add(ttl)
		}
		labels, ann := NamespaceLabels(t.id, spec.Repository, spec.PullRequest, exp)
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: t.ns, Labels: labels, Annotations: ann}}, metav1.CreateOptions{FieldManager: FieldManager})
		if apierrors.IsAlreadyExists(err) && attempt == 0 {
			continue // created meanwhile: judge it like any existing one
		}
		if err != nil {
			return false, apiError(t.c, "creating namespace "+t.ns, err)
		}
		r.progress(ctx).Printf("namespace %s created (%s=true, environment %s)", t.ns, LabelManaged, t.id)
		return true, nil
	}
}

// dropNamespace deletes the namespace this run made, when it stopped before any workload: a
// refusal leaves nothing behind. It does not wait; af down would.
func (r *Runtime) dropNamespace(ctx context.Context, t *target) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := t.c.cs.CoreV1().Namespaces().Delete(ctx, t.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		r.progress(ctx).Printf("namespace %s made by this run could not be removed (%v): af down removes it", t.ns, err)
		return
	}
	r.progress(ctx).Printf("namespace %s made by this run removed", t.ns)
}

// NamespaceLabels are the labels and annotations of an environment's namespace: af's mark
// (managed), its id, its repository (exact in the annotation, as a label value in the label),
// its pull request (0: none) and its expiry (zero: none). The App and the reaper find
// environments by them.
func NamespaceLabels(id, repository string, pullRequest int, expires time.Time) (labels, annotations map[string]string) {
	labels = map[string]string{LabelManaged: "true", LabelEnvironment: id, LabelManagedBy: "af"}
	annotations = map[string]string{}
	if repository != "" {
		annotations[AnnotationRepository] = repository
		if v := repoLabel(repository); v != "" {
			labels[LabelRepository] = v
		}
	}
	if pullRequest > 0 {
		labels[LabelPullRequest] = strconv.Itoa(pullRequest)
	}
	if !expires.IsZero() {
		exp := expires.UTC().Truncate(time.Second)
		labels[LabelExpires] = strconv.FormatInt(exp.Unix(), 10)
		annotations[AnnotationExpiresAt] = exp.Format(time.RFC3339)
	}
	return labels, annotations
}

// resolver finds the cluster resolver's Service and the pods behind it.
func (r *Runtime) resolver(ctx context.Context, t *target) (resolverRef, error) {
	ns, name, _ := strings.Cut(r.opts.Resolver, "/")
	svc, err := t.c.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return resolverRef{}, failure.Newf(failure.ClusterLacks, "no cluster DNS Service %s/%s: the sidecar asks it about the environment's own names", ns, name).
			WithHint("Point af at the cluster's DNS Service (Options.Resolver, namespace/name).")
	}
	if err != nil {
		return resolverRef{}, apiError(t.c, "reading the cluster DNS Service "+r.opts.Resolver, err)
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone || len(svc.Spec.Selector) == 0 {
		return resolverRef{}, failure.Newf(failure.ClusterLacks, "the cluster DNS Service %s/%s has no cluster address or no selector", ns, name)
	}
	return resolverRef{Addr: net.JoinHostPort(svc.Spec.ClusterIP, "53"), Namespace: ns, Selector: svc.Spec.Selector}, nil
}
