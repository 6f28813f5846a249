package kubernetes

// Finding environments by their labels, for the App's teardowns and the reaper.

import (
	"context"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	afruntime "github.com/antifailure/af/runtime"
)

// Environments lists the managed namespaces (dev.antifailure.managed=true) that match f, as
// their labels and annotations describe them. Namespaces without the managed label are never
// listed, whatever their name. The kubeconfig's default context is used (or the pod's service
// account, in a cluster).
func (r *Runtime) Environments(ctx context.Context, f afruntime.Filter) ([]afruntime.Environment, error) {
	c, err := r.connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	sel := labels.Set{LabelManaged: "true"}
	if f.Repository != "" {
		if v := repoLabel(f.Repository); v != "" {
			sel[LabelRepository] = v
		}
	}
	if f.PullRequest > 0 {
		sel[LabelPullRequest] = strconv.Itoa(f.PullRequest)
	}
	list, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, apiError(c, "listing af's namespaces", err)
	}
	var out []afruntime.Environment
	for _, ns := range list.Items {
		e := afruntime.Environment{
			ID:          ns.Labels[LabelEnvironment],
			Namespace:   ns.Name,
			Repository:  ns.Annotations[AnnotationRepository],
			Terminating: ns.DeletionTimestamp != nil,
			Created:     ns.CreationTimestamp.UTC(),
		}
		if f.Repository != "" && !strings.EqualFold(e.Repository, f.Repository) {
			continue // the label is lossy (lower case, cut to 63): the annotation decides
		}
		if n, err := strconv.Atoi(ns.Labels[LabelPullRequest]); err == nil && n > 0 {
			e.PullRequest = n
		}
		if s, err := strconv.ParseInt(ns.Labels[LabelExpires], 10, 64); err == nil && s > 0 {
			e.Expires = time.Unix(s, 0).UTC()
		}
		if e.ID == "" {
			e.ID = ns.Name
		}
		out = append(out, e)
	}
	return out, nil
}

// Reachable says whether the cluster answers with the credentials af has: the App's readiness.
func (r *Runtime) Reachable(ctx context.Context) error {
	c, err := r.connect(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := c.cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: LabelManaged + "=true", Limit: 1}); err != nil {
		return apiError(c, "listing af's namespaces", err)
	}
	return nil
}
