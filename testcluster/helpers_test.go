package testcluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// cluster returns the running test cluster. Without AF_TESTCLUSTER=1 the test
// is skipped, loudly: these tests need root and a real cluster (make test-cluster).
func cluster(t *testing.T) *testcluster.Handle {
	t.Helper()
	return testcluster.Require(t)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// namespace creates a fresh namespace, deleted when the test ends.
func namespace(t *testing.T, h *testcluster.Handle) string {
	t.Helper()
	base := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	name := fmt.Sprintf("aftc-%s-%04x", base, rand.UintN(0xffff))
	mustKubectl(t, h, "", "create", "namespace", name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = h.Kubectl(ctx, "", "delete", "namespace", name, "--wait=false")
	})
	return name
}

func mustKubectl(t *testing.T, h *testcluster.Handle, stdin string, args ...string) string {
	t.Helper()
	out, err := h.Kubectl(ctxFor(t, 2*time.Minute), stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// serverPod starts a pod running aftool's TCP (:8080) and UDP (:8081) echo and
// waits until it is Ready; it returns the pod's IP.
func serverPod(t *testing.T, h *testcluster.Handle, ns, name string, labels map[string]string) string {
	t.Helper()
	applyPod(t, h, ns, name, h.TestImage, "Never", labels, []string{"aftool", "serve", "-tcp", ":8080", "-udp", ":8081"}, true)
	return podIP(t, h, ns, name)
}

// clientPod starts a pod that sleeps, for kubectl exec, and waits until it runs.
func clientPod(t *testing.T, h *testcluster.Handle, ns, name string, labels map[string]string) {
	t.Helper()
	applyPod(t, h, ns, name, h.TestImage, "Never", labels, []string{"sleep", "3600"}, false)
}

func applyPod(t *testing.T, h *testcluster.Handle, ns, name, image, pull string, labels map[string]string, command []string, probe bool) {
	t.Helper()
	var lb strings.Builder
	for k, v := range labels {
		fmt.Fprintf(&lb, "    %s: %q\n", k, v)
	}
	if lb.Len() == 0 {
		lb.WriteString("    af-test: \"1\"\n")
	}
	var cmd strings.Builder
	for _, c := range command {
		fmt.Fprintf(&cmd, "    - %q\n", c)
	}
	readiness := ""
	if probe {
		readiness = "    readinessProbe:\n      tcpSocket: {port: 8080}\n      periodSeconds: 1\n"
	}
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  labels:
%sspec:
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
  - name: main
    image: %s
    imagePullPolicy: %s
    command:
%s%s`, name, ns, lb.String(), image, pull, cmd.String(), readiness)
	mustKubectl(t, h, manifest, "apply", "-f", "-")
	mustKubectl(t, h, "", "-n", ns, "wait", "--for=condition=Ready", "pod/"+name, "--timeout=120s")
}

func podIP(t *testing.T, h *testcluster.Handle, ns, name string) string {
	t.Helper()
	ip := strings.TrimSpace(mustKubectl(t, h, "", "-n", ns, "get", "pod", name, "-o", "jsonpath={.status.podIP}"))
	if ip == "" {
		t.Fatalf("pod %s/%s has no IP", ns, name)
	}
	return ip
}

// execIn runs a command in a pod and returns its output and whether it exited 0.
func execIn(ctx context.Context, h *testcluster.Handle, ns, pod string, args ...string) (string, error) {
	return h.Kubectl(ctx, "", append([]string{"-n", ns, "exec", pod, "--"}, args...)...)
}

func mustExec(t *testing.T, h *testcluster.Handle, ns, pod string, args ...string) string {
	t.Helper()
	out, err := execIn(ctxFor(t, time.Minute), h, ns, pod, args...)
	if err != nil {
		t.Fatalf("in %s/%s: %v (output %q)", ns, pod, err, out)
	}
	return out
}
