package root

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/testcluster"
)

// TestUpBuildsPublishesAndRuns is af up from the command line, end to end: a service with
// build: is built by a real container daemon, published to the cluster's registry, deployed
// by digest behind the probe and the gate, reported in -o json, and taken down again.
func TestUpBuildsPublishesAndRuns(t *testing.T) {
	h := testcluster.Require(t)
	dockerHost := os.Getenv("AF_DOCKER_HOST")
	if dockerHost == "" {
		msg := "SKIPPED: needs a container daemon; make test starts one and sets AF_DOCKER_HOST"
		fmt.Fprintln(os.Stderr, "!!! "+t.Name()+": "+msg)
		t.Skip(msg)
	}
	if h.Enforcer != testcluster.EnforcerKubeRouter {
		t.Skipf("SKIPPED: the cluster runs without an enforcer; af up would rightly refuse")
	}
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
services:
  app:
    kind: worker
    port: 8080
    build: {context: app}
    command: ["/aftool", "serve", "-tcp", ":8080", "-udp", ""]
`, h.Registry)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"KUBECONFIG":  h.Kubeconfig,
		"DOCKER_HOST": dockerHost,
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
	if d := run(t, env, "", "down", "-f", manifest, "--env", "cli-e2e"); d.code != 0 {
		t.Errorf("af down: exit %d\n%s", d.code, d.errOut)
	}
}
