package kubernetes

// The ingress controller's pods, which the environment's policy lets in to its web services:
// named by the operator (AF_INGRESS_CONTROLLER), else found on the cluster. The IngressClass the
// preview Ingresses use (runtime.ingress_class, else the cluster's default, else its only one)
// names its controller; the well-known installs of that controller (Traefik, k3s's Traefik,
// ingress-nginx) are found by their pods' labels. When none can be named and the manifest asks
// for preview URLs, af up fails at once, saying what to set: an environment whose URL could
// never answer is not waited for.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antifailure/af/failure"
)

// knownControllers are the pod labels of the well-known installs of each IngressClass
// controller, most specific first.
var knownControllers = map[string][]map[string]string{
	// Traefik's Helm chart and k3s's bundled Traefik (kube-system) both label so.
	"traefik.io/ingress-controller": {{"app.kubernetes.io/name": "traefik"}},
	// ingress-nginx's Helm chart and its static manifests (cloud, kind, baremetal).
	"k8s.io/ingress-nginx": {
		{"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"},
		{"app.kubernetes.io/name": "ingress-nginx"},
	},
}

// defaultClassAnnotation marks the cluster's default IngressClass.
const defaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"

// ingressController returns whose pods the environment lets in to its web services: the
// operator's setting, else the controller found on the cluster. nil when the manifest has no
// domain (no Ingress, nothing to let in).
func (r *Runtime) ingressController(ctx context.Context, t *target) (*IngressController, error) {
	if t.m.Runtime.Domain == "" {
		return nil, nil
	}
	if r.opts.IngressController != nil {
		return r.opts.IngressController, nil
	}
	lacks := func(format string, args ...any) error {
		return failure.Newf(failure.ClusterLacks, "runtime.domain is set, but %s", fmt.Sprintf(format, args...)).
			WithHint("Name the ingress controller's pods with AF_INGRESS_CONTROLLER=NAMESPACE/LABEL=VALUE (the action: env AF_INGRESS_CONTROLLER), e.g. ingress-nginx/app.kubernetes.io/name=ingress-nginx, so the environment's policy lets it in; or remove runtime.domain for an environment without preview URLs.")
	}
	classes, err := t.c.cs.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, lacks("af could not list the cluster's IngressClasses to find the ingress controller (%v)", err)
	}
	var class string
	var controller string
	for _, c := range classes.Items {
		switch {
		case t.m.Runtime.IngressClass != "":
			if c.Name == t.m.Runtime.IngressClass {
				class, controller = c.Name, c.Spec.Controller
			}
		case c.Annotations[defaultClassAnnotation] == "true", len(classes.Items) == 1:
			class, controller = c.Name, c.Spec.Controller
		}
	}
	switch {
	case class == "" && t.m.Runtime.IngressClass != "":
		return nil, lacks("the cluster has no IngressClass %s (runtime.ingress_class)", t.m.Runtime.IngressClass)
	case class == "" && len(classes.Items) == 0:
		return nil, lacks("the cluster has no IngressClass, so no ingress controller serves preview URLs")
	case class == "":
		return nil, lacks("the cluster has %d IngressClasses and none is the default: set runtime.ingress_class", len(classes.Items))
	}
	selectors, ok := knownControllers[controller]
	if !ok {
		return nil, lacks("IngressClass %s's controller %s is not one af finds by itself (it knows %s)", class, controller, strings.Join(slices.Sorted(maps.Keys(knownControllers)), ", "))
	}
	for _, sel := range selectors {
		pods, err := t.c.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String(), Limit: 100})
		if err != nil {
			return nil, lacks("af could not list pods across namespaces to find IngressClass %s's controller (%v)", class, err)
		}
		namespaces := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				namespaces[p.Namespace] = true
			}
		}
		switch len(namespaces) {
		case 0:
			continue
		case 1:
			ic := &IngressController{Namespace: slices.Collect(maps.Keys(namespaces))[0], Labels: maps.Clone(sel)}
			r.progress(ctx).Printf("ingress controller: IngressClass %s (%s), pods %s/%s", class, controller, ic.Namespace, labels.SelectorFromSet(ic.Labels))
			return ic, nil
		default:
			return nil, lacks("IngressClass %s's controller %s runs in %d namespaces (%s): af cannot tell which serves the previews", class, controller, len(namespaces), strings.Join(slices.Sorted(maps.Keys(namespaces)), ", "))
		}
	}
	return nil, lacks("no running pod of IngressClass %s's controller %s was found by its usual labels", class, controller)
}
