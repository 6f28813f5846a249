package kubernetes

// Preview URLs: one Ingress per web service with a domain, waited for through the controller.

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

// publish gives every web service an Ingress at its preview host and waits until each URL
// (with its health path) stops answering 404, 502, 503 or 504: pods being ready does not mean
// the ingress controller routes to them yet. Redirects are never followed.
func (r *Runtime) previewURLs(ctx context.Context, t *target, e *env) (map[string]string, error) {
	domain := t.m.Runtime.Domain
	if domain == "" {
		r.progress(ctx).Printf("no runtime.domain: no Ingress and no preview URL")
		return nil, nil
	}
	urls := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(t.m.Services)) {
		s := t.m.Services[name]
		if manifest.KindOf(s) != "web" || s.Port == 0 {
			continue
		}
		host, err := envid.PreviewHost(t.id, name, domain)
		if err != nil {
			return urls, err
		}
		ing := e.ingress(name, s, host)
		if _, err := apply(ctx, t.c, t.c.cs.NetworkingV1().Ingresses(t.ns), "networking.k8s.io/v1", "Ingress", name, ing); err != nil {
			return urls, err
		}
		u := r.opts.URLScheme + "://" + host + "/"
		urls[name] = u
		check := strings.TrimSuffix(u, "/") + s.HealthPath
		if s.HealthPath == "" {
			check = u
		}
		r.progress(ctx).Printf("service %s: published at %s; waiting until %s answers", name, u, check)
		if err := r.waitURL(ctx, name, check); err != nil {
			return urls, err
		}
	}
	return urls, nil
}

// waitURL polls url until it answers with anything but 404, 502, 503 or 504.
func (r *Runtime) waitURL(ctx context.Context, service, url string) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if r.opts.IngressAddress != "" {
					addr = r.opts.IngressAddress // the preview host, reached where the controller listens
				}
				return dialer.DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	last := "no answer yet"
	err := poll(ctx, r.opts.ReadyTimeout, func(el time.Duration) {
		r.progress(ctx).Printf("  %s: %s (%s)", service, last, el)
	}, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, failure.Newf(failure.Internal, "preview URL %s: %v", url, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		last = resp.Status
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false, nil
		}
		r.progress(ctx).Printf("  %s: %s answered %s", service, url, resp.Status)
		return true, nil
	})
	if errors.Is(err, errTimeout) {
		return failure.Newf(failure.NotReady, "%s: the preview URL %s did not answer within %s (last: %s); the pods are ready, so the ingress controller does not route to them", service, url, r.opts.ReadyTimeout, last).
			WithHint("Check that the ingress controller serves this Ingress class and that AF_INGRESS_CONTROLLER names its pods, so the environment's policy lets it in.")
	}
	return err
}

// ingress publishes a web service at its preview host.
func (e *env) ingress(name string, s *manifest.Service, host string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: meta(name, e.Namespace, e.labels(RoleService, name)),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: name, Port: networkingv1.ServiceBackendPort{Number: int32(s.Port)},
						}},
					}},
				}},
			}},
		},
	}
	if c := e.Manifest.Runtime.IngressClass; c != "" {
		ing.Spec.IngressClassName = &c
	}
	return ing
}
