package deploy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/afbuild"
	"github.com/antifailure/af/testcluster"
	"github.com/antifailure/af/version"
)

func TestMain(m *testing.M) { os.Exit(afbuild.Main(m)) }

// TestExampleUpAndDownAsCI: af up and af down of the example from the command line, as the
// af-ci identity exactly as docs/github.md sets it up (deploy/ci applied as written, admission
// policies included, a token in a self-contained kubeconfig): af up says nothing of its
// credential reaching past the previews, the example comes up contained and its URL answers;
// af down removes the namespace. The same journey under the action is action's
// TestActionUnderActDocumented.
func TestExampleUpAndDownAsCI(t *testing.T) {
	h := testcluster.Require(t)
	h.RequireState(t, testcluster.StateEnforcing) // without an enforcer af up rightly refuses
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := h.ImportEngineImage(ctx, ".."); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	images := map[string]string{}
	for _, svc := range []string{"web", "worker"} {
		bin := filepath.Join(dir, "shop-"+svc)
		if err := afbuild.Build(ctx, "../examples/shop", bin, afbuild.Package("./"+svc)); err != nil {
			t.Fatal(err)
		}
		images[svc] = "af.local/shop-" + svc + ":as-ci"
		if err := h.ImportBinaryImage(ctx, images[svc], bin); err != nil {
			t.Fatal(err)
		}
	}
	flat, err := h.CIKubeconfig(ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "af-ci.kubeconfig") // as a runner writes the secret to a file
	if err := os.WriteFile(kc, []byte(flat), 0o600); err != nil {
		t.Fatal(err)
	}
	af := afbuild.Binary(t)
	env := append(os.Environ(), "KUBECONFIG="+kc, "AF_ENGINE_IMAGE="+version.LocalEngineImage,
		"AF_INGRESS_ADDRESS="+h.IngressHTTP, "AF_URL_SCHEME=http", "AF_REQUIRE_BOUNDED_CREDENTIAL=1")
	for k, v := range h.GateEnv() {
		env = append(env, k+"="+v)
	}
	const id = "shop-as-ci"
	afRun := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, af, args...)
		cmd.Env = env
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	t.Cleanup(func() {
		_, _ = h.Kubectl(context.Background(), "", "delete", "namespace", "af-env-"+id, "--ignore-not-found", "--wait=false")
	})
	out, errOut, err := afRun("up", "-f", "../examples/shop/af.yaml", "--env", id,
		"--image", "web="+images["web"], "--image", "worker="+images["worker"], "-o", "json")
	if err != nil {
		t.Fatalf("af up as af-ci (AF_REQUIRE_BOUNDED_CREDENTIAL=1): %v\n%s\n%s", err, out, errOut)
	}
	var res struct {
		Namespace string
		URLs      map[string]string
		Probe     struct{ Verdict string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("af up -o json: %v\n%s", err, out)
	}
	if res.Probe.Verdict != "contained" || res.Namespace != "af-env-"+id || res.URLs["web"] != "http://"+id+"-web.preview.af.test/" {
		t.Errorf("af up as af-ci: %+v\n%s", res, errOut)
	}
	if strings.Contains(errOut, "AF-RUN-056") || strings.Contains(errOut, "reaches past") {
		t.Errorf("af up as af-ci warned of its credential:\n%s", errOut)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.IngressHTTP+"/healthz", nil)
	req.Host = id + "-web.preview.af.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("%s through the ingress controller: %v %v", req.Host, err, resp)
	} else {
		resp.Body.Close()
	}
	if _, errOut, err := afRun("down", "-f", "../examples/shop/af.yaml", "--env", id, "-q"); err != nil {
		t.Fatalf("af down as af-ci: %v\n%s", err, errOut)
	}
	if phase, _ := h.Kubectl(ctx, "", "get", "ns", res.Namespace, "--ignore-not-found", "-o", "jsonpath={.status.phase}"); strings.TrimSpace(phase) == "Active" {
		t.Errorf("namespace %s still active after af down as af-ci", res.Namespace)
	}
}
