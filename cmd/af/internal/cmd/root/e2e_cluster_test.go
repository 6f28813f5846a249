package root

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/testcluster"
)

// TestUpBuildsPublishesAndRuns is af up from the command line, end to end: a service with
// build: is built by a real container daemon, published to the cluster's registry, deployed
// by digest behind the probe and the gate, reported in -o json, and taken down again.
func TestUpBuildsPublishesAndRuns(t *testing.T) {
	h := testcluster.Require(t)
	dockerHost := os.Getenv("AF_DOCKER_HOST")
	if dockerHost == "" {
		testreq.Elsewhere(t, "needs a container daemon; make test starts one and sets AF_DOCKER_HOST")
	}
	h.RequireState(t, testcluster.StateEnforcing) // without an enforcer af up would rightly refuse
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.ImportEngineImage(ctx, "../../../../.."); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	app := filepath.Join(dir, "app")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(app, "aftool"), "./testcluster/cmd/aftool")
	build.Dir, build.Env = "../../../../..", append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build aftool: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(app, "Dockerfile"), []byte("FROM scratch\nCOPY aftool /aftool\nENTRYPOINT [\"/aftool\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dir, "af.yaml")
	if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`name: clie2e
runtime:
  provider: kubernetes
  registry: %s/af-cli
  ttl: 1h
egress:
  rules:
    - host: "*.capture.af.test"
      mode: capture
services:
  app:
    kind: worker
    port: 8080
    build: {context: app}
    command: ["/aftool", "serve", "-tcp", ":8080", "-udp", "", "-webhook", ":8081"]
    env:
      WEBHOOK_SECRET: %s
`, h.Registry, e2eHookSecret)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBECONFIG":         h.Kubeconfig,
		"DOCKER_HOST":        dockerHost,
		"AF_E2E_HOOK_SECRET": e2eHookSecret,
		"AF_E2E_WRONG":       "not-the-secret",
	}
	for k, v := range h.GateEnv() {
		env[k] = v
	}
	t.Cleanup(func() { run(t, env, "", "down", "-f", manifest, "--env", "cli-e2e", "-q") })
	r := run(t, env, "", "up", "-f", manifest, "--env", "cli-e2e", "-o", "json")
	if r.code != 0 {
		t.Fatalf("af up: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	var res struct {
		Namespace string
		Probe     struct{ Verdict string }
		Services  []struct {
			Name           string
			State          string
			Ready, Desired int
		}
	}
	if err := json.Unmarshal([]byte(r.out), &res); err != nil {
		t.Fatalf("af up -o json: %v\n%s", err, r.out)
	}
	if res.Probe.Verdict != "contained" || len(res.Services) != 1 || res.Services[0].State != "running" || res.Services[0].Ready != 1 {
		t.Errorf("result: %+v", res)
	}
	for _, want := range []string{"build app: built in", "images: app is " + h.Registry + "/af-cli/clie2e/app@sha256:"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.errOut)
		}
	}
	followOnTheCluster(t, h, env, manifest, res.Namespace)
	observeOnTheCluster(t, h, env, manifest, res.Namespace)
	if d := run(t, env, "", "down", "-f", manifest, "--env", "cli-e2e"); d.code != 0 {
		t.Errorf("af down: exit %d\n%s", d.code, d.errOut)
	}
}

// e2eHookSecret is the webhook secret the test's service verifies deliveries with.
const e2eHookSecret = "e2e-hook-secret-4f1c"

// observeOnTheCluster runs the commands that read what the environment saw, against the real
// environment: af net log names the blocked host, its rule and the pod that asked; af inbox
// wait returns a capture the pod made and times out (exit 1) on one it did not; af webhook
// trigger delivers a signed webhook the service verifies (and a wrongly signed one is refused
// with AF-RUN-055); af logs shows the service's own lines about it.
func observeOnTheCluster(t *testing.T, h *testcluster.Handle, env map[string]string, manifest, ns string) {
	t.Helper()
	ctx := context.Background()
	pod, err := h.Kubectl(ctx, "", "-n", ns, "get", "pods", "-l", "dev.antifailure.service=app,dev.antifailure.workload=service", "-o", "jsonpath={.items[0].metadata.name} {.items[0].status.podIP}")
	if err != nil {
		t.Fatalf("the app's pod: %v %s", err, pod)
	}
	podName, podIP, _ := strings.Cut(strings.TrimSpace(pod), " ")
	target := []string{"-f", manifest, "--env", "cli-e2e"}

	// The blocked request followOnTheCluster made, with its rule and the pod that made it.
	r := run(t, env, "", append([]string{"net", "log", "--blocked", "--host", "blocked-api.af.test"}, target...)...)
	if r.code != 0 {
		t.Fatalf("af net log --blocked: exit %d\n%s", r.code, r.errOut)
	}
	line := ""
	for _, l := range strings.Split(r.out, "\n") {
		if strings.Contains(l, "blocked-api.af.test:80/after-follow") {
			line = l
		}
	}
	for _, want := range []string{"block", "rule=egress.default", "from=app/" + podName} {
		if !strings.Contains(line, want) {
			t.Errorf("af net log --blocked: the decision line lacks %q:\n%s", want, r.out)
		}
	}
	if !strings.Contains(r.out, "blocked most: blocked-api.af.test") {
		t.Errorf("af net log --blocked: no summary naming the host:\n%s", r.out)
	}

	// An HTTP capture made from the pod arrives in the inbox, with the pod's address.
	if got, err := h.Kubectl(ctx, "", "-n", ns, "exec", "deploy/app", "--", "/aftool", "http", "-timeout", "3s", "http://hooks.capture.af.test/order/42"); err != nil || !strings.HasPrefix(got, "20") {
		t.Errorf("the request to a captured host: %v %q, want the sidecar's 2xx", err, got)
	}
	r = run(t, env, "", append([]string{"inbox", "wait", "--host", "hooks.capture.af.test", "--timeout", "20s", "-o", "json"}, target...)...)
	var msg struct{ ID, Kind, Host, Path, Client, Service, Instance string }
	if r.code != 0 || json.Unmarshal([]byte(r.out), &msg) != nil || msg.Kind != "http" || msg.Path != "/order/42" || msg.Client != podIP || msg.Service != "app" || msg.Instance != podName {
		t.Errorf("af inbox wait: exit %d, %+v (want the capture from %s)\n%s\n%s", r.code, msg, podIP, r.out, r.errOut)
	}
	if s := run(t, env, "", append([]string{"inbox", "show", msg.ID}, target...)...); s.code != 0 || !strings.Contains(s.out, "/order/42") {
		t.Errorf("af inbox show %s: exit %d\n%s\n%s", msg.ID, s.code, s.out, s.errOut)
	}
	if w := run(t, env, "", append([]string{"inbox", "wait", "--host", "never.capture.af.test", "--timeout", "1s"}, target...)...); w.code != 1 {
		t.Errorf("af inbox wait for what never comes: exit %d, want 1\n%s", w.code, w.errOut)
	}

	// A signed delivery the service verifies; one signed with another secret it refuses.
	r = run(t, env, "", append([]string{"webhook", "trigger", "--to", "app:8081/webhook", "--provider", "github", "--secret-env", "AF_E2E_HOOK_SECRET", "--event", "ping"}, target...)...)
	if r.code != 0 || !strings.Contains(r.out, "200") || !strings.Contains(r.out, "verified") {
		t.Errorf("af webhook trigger: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
	if strings.Contains(r.out+r.errOut, e2eHookSecret) {
		t.Errorf("af webhook trigger printed the secret")
	}
	r = run(t, env, "", append([]string{"webhook", "trigger", "--to", "app:8081/webhook", "--provider", "github", "--secret-env", "AF_E2E_WRONG", "--event", "ping"}, target...)...)
	if r.code == 0 || !strings.Contains(r.errOut, "AF-RUN-055") || !strings.Contains(r.out, "401") {
		t.Errorf("af webhook trigger with the wrong secret: exit %d, want AF-RUN-055 and the service's 401\n%s\n%s", r.code, r.out, r.errOut)
	}

	// The service's own lines, prefixed with its pod.
	r = run(t, env, "", append([]string{"logs", "app"}, target...)...)
	if r.code != 0 || !strings.Contains(r.out, podName) || !strings.Contains(r.out, `webhook: verified "ping"`) || !strings.Contains(r.out, "webhook: signature refused") {
		t.Errorf("af logs app: exit %d\n%s\n%s", r.code, r.out, r.errOut)
	}
}

// followOnTheCluster: `af net log --follow` through a real port-forward prints a decision the
// sidecar made after it started within a second of the decision, and Ctrl-C (its context
// ending) leaves no goroutine and no loopback listener behind.
func followOnTheCluster(t *testing.T, h *testcluster.Handle, env map[string]string, manifest, ns string) {
	t.Helper()
	listenersBefore, goroutinesBefore := loopbackListeners(t), runtime.NumGoroutine()
	var out lockedBuffer
	ios, _, _, errOut := iostreams.Test()
	ios.Out = &out
	ios.SetJSON(true)
	f := factory.New(ios, func(k string) string { return env[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, f, []string{"net", "log", "-f", manifest, "--env", "cli-e2e", "--follow", "--host", "blocked-api.af.test", "-o", "json"})
	}()
	time.Sleep(3 * time.Second) // the port-forward opens and the first read is made
	before := time.Now()
	// A request the sidecar refuses, made from inside the service's pod (the transparent port:
	// the name resolves to the sidecar, which blocks it).
	if got, err := h.Kubectl(context.Background(), "", "-n", ns, "exec", "deploy/app", "--", "/aftool", "http", "-timeout", "3s", "http://blocked-api.af.test/after-follow"); err != nil || !strings.HasPrefix(got, "403 af sidecar: blocked") {
		t.Errorf("the request to a host no rule allows: %v %q, want the sidecar's 403", err, got)
	}
	var seen time.Time
	var entry struct {
		Time    time.Time
		Host    string
		Path    string
		Allowed bool
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && seen.IsZero(); time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, "/after-follow") && json.Unmarshal([]byte(l), &entry) == nil {
				seen = time.Now()
				break
			}
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("af net log --follow ended with %d: %s", code, errOut.String())
	}
	if seen.IsZero() {
		t.Fatalf("af net log --follow did not print the decision:\n%s\n%s", out.String(), errOut.String())
	}
	if entry.Allowed || entry.Time.Before(before.Add(-time.Second)) {
		t.Errorf("the decision printed: %+v", entry)
	}
	if lag := seen.Sub(entry.Time); lag > time.Second {
		t.Errorf("printed %s after the sidecar made the decision; want within 1s", lag.Round(time.Millisecond))
	} else {
		t.Logf("af net log --follow printed the decision %s after the sidecar made it", lag.Round(time.Millisecond))
	}
	// client-go keeps its idle connections to the API server across commands; what must be
	// gone is everything of the forward and of the command itself.
	leaked := func() string {
		buf := make([]byte, 1<<20)
		var left []string
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "tools/portforward") || strings.Contains(g, "httpstream") || strings.Contains(g, "cmd/net.") || strings.Contains(g, "sidecar/control.") {
				left = append(left, g)
			}
		}
		return strings.Join(left, "\n\n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for (leaked() != "" || loopbackListeners(t) > listenersBefore) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if l := leaked(); l != "" {
		t.Errorf("goroutines of the forward or the command after Ctrl-C (%d goroutines now, %d before):\n%s", runtime.NumGoroutine(), goroutinesBefore, l)
	}
	if n := loopbackListeners(t); n > listenersBefore {
		t.Errorf("%d loopback listeners after Ctrl-C, %d before", n, listenersBefore)
	}
}

// loopbackListeners counts this process's TCP sockets listening on 127.0.0.1.
func loopbackListeners(t *testing.T) int {
	t.Helper()
	inodes := map[string]bool{}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile("/proc/self/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		// local_address 0100007F:port, state 0A (LISTEN), inode in field 9.
		if len(f) > 9 && strings.HasPrefix(f[1], "0100007F:") && f[3] == "0A" && inodes[f[9]] {
			n++
		}
	}
	return n
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
