package testcluster_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testreq"
)

// TestIngress: an Ingress served by the cluster's Traefik answers on the
// node's loopback address.
func TestIngress(t *testing.T) {
	h := cluster(t)
	if h.IngressHTTP == "" {
		testreq.Missing(t, "this cluster runs without the ingress controller (started with -no-ingress or AF_INGRESS=0)")
	}
	ns := namespace(t, h)
	token := fmt.Sprintf("af-ingress-%08x", rand.Uint32())
	applyPod(t, h, ns, "web", h.TestImage, "Never", map[string]string{"app": "web"},
		[]string{"sh", "-c", "mkdir -p /tmp/www && echo " + token + " > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}, true)
	host := "web-" + ns + ".af.test"
	mustKubectl(t, h, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: %[1]s}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: %[1]s}
spec:
  rules:
  - host: %[2]s
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: web, port: {number: 80}}
`, ns, host), "apply", "-f", "-")
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	var last string
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctxFor(t, 10*time.Second), http.MethodGet, "http://"+h.IngressHTTP+"/index.html", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), token) {
				t.Logf("http://%s with Host %s answered from the pod after %d attempt(s)", h.IngressHTTP, host, attempt)
				return
			}
			last = fmt.Sprintf("%s %q", resp.Status, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("ingress never answered with the pod's page; last: %s", last)
		}
		time.Sleep(time.Second)
	}
}
