package kubernetes

// Reaching a port of a pod in an environment from where af runs: a port-forward through the
// API server (client-go's WebSocket tunnel, falling back to SPDY for API servers before 1.30)
// on a random loopback port, closed when the caller is done. It needs pods/portforward on the
// environment's namespace and nothing else; without it af says so and tries nothing else.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// Forward is an open port-forward: Addr is a loopback host:port that reaches the pod's port.
type Forward struct {
	Addr string
	Pod  string

	stop     chan struct{}
	done     chan error
	closeOne sync.Once
}

// Close ends the forward and waits until its listener and streams are gone.
func (f *Forward) Close() error {
	var err error
	f.closeOne.Do(func() {
		close(f.stop)
		err = <-f.done
	})
	return err
}

// forward opens a port-forward to port of a running, ready pod of the environment that sel
// selects.
// The caller has asked mayForward.
func (r *Runtime) forward(ctx context.Context, t *target, sel map[string]string, port int, what string) (*Forward, error) {
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set(sel).String()})
	if err != nil {
		return nil, apiError(t.c, "listing the pods of "+what, err)
	}
	var pod string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			pod = p.Name
			break
		}
	}
	if pod == "" {
		return nil, failure.Newf(failure.NotPlaced, "%s has no running, ready pod in namespace %s to reach", what, t.ns).
			WithHint("Run `af status` to see what it is doing.")
	}
	u := t.c.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(t.ns).Name(pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(t.c.cfg)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	var dialer httpstream.Dialer = spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	if ws, err := portforward.NewSPDYOverWebsocketDialer(u, t.c.cfg); err == nil {
		dialer = portforward.NewFallbackDialer(ws, dialer, func(err error) bool {
			return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
		})
	}
	f := &Forward{Pod: pod, stop: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan struct{})
	// The forwarder's own lines (one per failed stream) are not shown: a failure reaches the
	// caller as the error of the request it broke.
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, f.stop, ready, io.Discard, io.Discard)
	if err != nil {
		return nil, fmt.Errorf("port-forward to %s: %w", pod, err)
	}
	go func() { f.done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-f.done:
		return nil, forwardError(t, pod, err)
	case <-ctx.Done():
		close(f.stop)
		<-f.done
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		close(f.stop)
		<-f.done
		return nil, failure.Newf(failure.ClusterUnreachable, "port-forward to pod %s/%s did not open within 30s", t.ns, pod)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		_ = f.Close()
		return nil, fmt.Errorf("port-forward to %s: no local port: %v", pod, err)
	}
	f.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
	return f, nil
}

// mayForward asks the API server whether af's identity may open a port-forward in the
// environment's namespace, so a refusal is named before anything is tried.
func (r *Runtime) mayForward(ctx context.Context, t *target) error {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: t.ns, Verb: "create", Resource: "pods", Subresource: "portforward"}}}
	res, err := t.c.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return apiError(t.c, "asking whether af may port-forward in "+t.ns, err)
	}
	if !res.Status.Allowed {
		return forwardRefused(t, res.Status.Reason)
	}
	return nil
}

func forwardRefused(t *target, reason string) error {
	msg := fmt.Sprintf("the identity of context %q may not open a port-forward to pods in namespace %s (pods/portforward, verb create)", t.c.context, t.ns)
	if reason != "" {
		msg += ": " + reason
	}
	return failure.Newf(failure.ForwardRefused, "%s", msg)
}

// forwardError names a failed forward: a refusal by RBAC as AF-RUN-053, anything else as the
// cluster being unreachable.
func forwardError(t *target, pod string, err error) error {
	if err == nil {
		err = errors.New("the forward ended before it was ready")
	}
	s := err.Error()
	if strings.Contains(s, "forbidden") || strings.Contains(s, "403") {
		return forwardRefused(t, s)
	}
	return failure.New(failure.ClusterUnreachable, fmt.Sprintf("port-forward to pod %s/%s: %v", t.ns, pod, err), err)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Sidecar opens a port-forward to the environment's sidecar control port, after checking the
// namespace is af's and this repository's. Only af's own identity reaches it this way: the
// environment's services cannot (the sidecar's ingress policy admits them on its proxy and DNS
// ports only).
func (r *Runtime) Sidecar(ctx context.Context, ref afruntime.Ref) (*afruntime.Link, error) {
	t, err := r.linkTarget(ctx, ref)
	if err != nil {
		return nil, err
	}
	f, err := r.forward(ctx, t, map[string]string{LabelRole: RoleSidecar}, sidecarControlPort, "the sidecar of "+ref.ID)
	if err != nil {
		return nil, err
	}
	return afruntime.NewLink(f.Addr, "port-forward to pod "+t.ns+"/"+f.Pod, f.Close), nil
}

// Service opens a port-forward to port (0: the manifest's) of one ready instance of service.
func (r *Runtime) Service(ctx context.Context, ref afruntime.Ref, service string, port int) (*afruntime.Link, error) {
	t, err := r.linkTarget(ctx, ref)
	if err != nil {
		return nil, err
	}
	s, ok := t.m.Services[service]
	if !ok {
		return nil, failure.Newf(failure.UsageInvalid, "the manifest has no service %q; it has %s", service, joinSorted(slices.Sorted(maps.Keys(t.m.Services))))
	}
	if port == 0 {
		port = s.Port
	}
	if port <= 0 || port > 65535 {
		return nil, failure.Newf(failure.UsageInvalid, "service %s has no port in the manifest: name one (SERVICE:PORT)", service)
	}
	f, err := r.forward(ctx, t, map[string]string{LabelService: service, LabelWorkload: WorkloadService}, port, "service "+service)
	if err != nil {
		return nil, err
	}
	return afruntime.NewLink(f.Addr, fmt.Sprintf("port-forward to pod %s/%s port %d", t.ns, f.Pod, port), f.Close), nil
}

// linkTarget resolves ref for a link: the permission asked first (without it nothing else is
// tried), then the namespace checked to be af's and this repository's.
func (r *Runtime) linkTarget(ctx context.Context, ref afruntime.Ref) (*target, error) {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := r.mayForward(ctx, t); err != nil {
		return nil, err
	}
	if err := ownNamespace(ctx, t, ref); err != nil {
		return nil, err
	}
	return t, nil
}
