package kubernetes

import (
	"context"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// Down deletes the environment's namespace, only when af made it, and waits until it is gone.
func (r *Runtime) Down(ctx context.Context, ref afruntime.Ref) (err error) {
	defer func() { err = interrupted(ctx, "removing environment "+ref.ID, err) }()
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return err
	}
	nss := t.c.cs.CoreV1().Namespaces()
	ns, err := nss.Get(ctx, t.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.progress(ctx).Printf("namespace %s does not exist: nothing to remove", t.ns)
		return nil
	}
	if err != nil {
		return apiError(t.c, "reading namespace "+t.ns, err)
	}
	if err := owned(&ns.ObjectMeta, ref.Repository); err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil {
		bg := metav1.DeletePropagationBackground
		uid := ns.UID
		err := nss.Delete(ctx, t.ns, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return apiError(t.c, "deleting namespace "+t.ns, err)
		}
		r.progress(ctx).Printf("namespace %s: deleting", t.ns)
	} else {
		r.progress(ctx).Printf("namespace %s: already being deleted, waiting", t.ns)
	}
	var last *corev1.Namespace
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	err = pollOn(ctx, r.opts.DownTimeout, apiWatches(wctx, namespaceAPIWatch(t)), func(el time.Duration) {
		r.progress(ctx).Printf("  namespace %s: still terminating (%s)%s", t.ns, el, holding(last))
	}, func() (bool, error) {
		n, err := nss.Get(ctx, t.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, apiError(t.c, "reading namespace "+t.ns, err)
		}
		if n.UID != ns.UID {
			return true, nil // gone, and made again by someone else meanwhile
		}
		last = n
		return false, nil
	})
	if errors.Is(err, errTimeout) {
		what := strings.TrimPrefix(holding(last), ": ")
		if what == "" {
			what = "the namespace controller has not finished; no finalizer is named on it yet"
		}
		return failure.Newf(failure.TeardownIncomplete, "namespace %s was still terminating after %s: %s", t.ns, r.opts.DownTimeout, what)
	}
	if err != nil {
		return err
	}
	r.progress(ctx).Printf("namespace %s: gone", t.ns)
	return nil
}

// holding says what keeps a terminating namespace: its own finalizers and what the namespace
// controller reports in its conditions (content with finalizers, content remaining).
func holding(ns *corev1.Namespace) string {
	if ns == nil {
		return ""
	}
	var parts []string
	for _, c := range ns.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.NamespaceFinalizersRemaining, corev1.NamespaceContentRemaining,
			corev1.NamespaceDeletionContentFailure, corev1.NamespaceDeletionDiscoveryFailure, corev1.NamespaceDeletionGVParsingFailure:
			parts = append(parts, c.Message)
		}
	}
	var fins []string
	for _, f := range ns.Spec.Finalizers {
		fins = append(fins, string(f))
	}
	fins = append(fins, ns.Finalizers...)
	if len(fins) > 0 && len(parts) == 0 {
		parts = append(parts, "finalizers on the namespace: "+strings.Join(fins, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, "; ")
}
