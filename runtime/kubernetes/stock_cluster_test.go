package kubernetes

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// TestStockIngressController: with nothing naming the ingress controller (no
// AF_INGRESS_CONTROLLER), af finds it from the cluster's default IngressClass and its pods, lets
// it in, and the preview URL answers through it. A class nothing serves fails af up at once,
// before anything is created.
func TestStockIngressController(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	rt := f.runtime(t, func(o *Options) { o.IngressController = nil })
	m := small(t, map[string]*manifest.Service{"web": {Kind: "web", Port: 8080, HealthPath: "/healthz",
		Command: manifest.Command{Shell: "mkdir -p /tmp/www && echo ok > /tmp/www/healthz && busybox httpd -f -p 8080 -h /tmp/www & trap 'kill $!; exit 0' TERM; wait"}}})
	m.Runtime.Domain = "preview.af.test"
	ref := afruntime.Ref{ID: "stock-ingress", Manifest: m}
	down(t, rt, ref)
	res, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	np, err := f.kube.NetworkingV1().NetworkPolicies(res.Namespace).Get(ctx, PolicyIngressCtl, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no policy lets the ingress controller in: %v", err)
	}
	from := np.Spec.Ingress[0].From[0]
	if from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != f.ingress.Namespace || from.PodSelector.MatchLabels["app.kubernetes.io/name"] != "traefik" {
		t.Fatalf("the policy lets in %+v", from)
	}
	if code, body := f.viaIngress(t, res.URLs["web"]+"healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("GET %shealthz through the ingress controller: %d %q", res.URLs["web"], code, body)
	}

	m2 := small(t, map[string]*manifest.Service{"web": {Kind: "web", Port: 8080}})
	m2.Runtime.Domain, m2.Runtime.IngressClass = "preview.af.test", "nothing-serves-this"
	ref2 := afruntime.Ref{ID: "stock-no-class", Manifest: m2}
	down(t, rt, ref2)
	_, err = rt.Up(ctx, afruntime.Spec{Ref: ref2})
	if failure.CodeOf(err) != failure.ClusterLacks.Code || !strings.Contains(err.Error(), "nothing-serves-this") {
		t.Fatalf("want %s naming the class, got %v", failure.ClusterLacks.Code, err)
	}
	if _, err := f.kube.CoreV1().Namespaces().Get(ctx, "af-env-stock-no-class", metav1.GetOptions{}); err == nil {
		t.Fatal("a namespace was created for an environment whose URLs nothing could serve")
	}
}

// TestUnpullableImagesFailAtOnce: an image whose registry cannot be reached, and an engine image
// (sidecar, gate, probe) that cannot be pulled, fail af up as soon as the kubelet says so,
// naming the workload, the image and the kubelet's reason; never by waiting out the timeout
// (the timeout's message says "ready after").
func TestUnpullableImagesFailAtOnce(t *testing.T) {
	besideOthers(t)
	f := setup(t)
	requireEnforcer(t, f.h)
	ctx := ctxFor(t, 10*time.Minute)
	cases := []struct {
		id, engine, image string
		want              []string
	}{
		// Port 9 on the node's loopback: nothing listens (the test cluster's containerd sends
		// every registry it does not know to its local mirror, which says not found).
		{"pull-unreachable", "", "127.0.0.1:9/af-nothing:1", []string{"service svc (pod svc-", "127.0.0.1:9/af-nothing:1", "cannot be pulled"}},
		// The sidecar's pod and the probe's both run the engine image: whichever the kubelet
		// reports first is named.
		{"pull-engine", "127.0.0.1:9/af-engine:none", "", []string{"127.0.0.1:9/af-engine:none", "cannot be pulled", "engine image"}},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			rt := f.runtime(t, func(o *Options) {
				o.ReadyTimeout = 3 * time.Minute
				if c.engine != "" {
					o.EngineImage = c.engine
				}
			})
			ref := afruntime.Ref{ID: c.id, Manifest: small(t, map[string]*manifest.Service{"svc": {Port: 8080, Image: c.image}})}
			down(t, rt, ref)
			start := time.Now()
			_, err := rt.Up(ctx, afruntime.Spec{Ref: ref})
			t.Logf("af up failed after %s: %v", time.Since(start).Round(100*time.Millisecond), err)
			if err == nil {
				t.Fatal("af up passed")
			}
			msg := err.Error() + " " + failure.Ensure(err).Report().Do
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the failure does not say %q: %s", w, msg)
				}
			}
			if c.engine != "" && !strings.Contains(msg, "the sidecar (pod af-sidecar-") && !strings.Contains(msg, "the probe (pod af-probe") {
				t.Errorf("the failure names neither the sidecar nor the probe: %s", msg)
			}
			if strings.Contains(msg, "ready after") || strings.Contains(msg, "did not finish within") {
				t.Errorf("af up waited out its timeout: %s", msg)
			}
		})
	}
}
