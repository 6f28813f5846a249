package action_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/antifailure/af/github/githubtest"
)

// TestActionUnderActStock runs the action under act as a stock cluster and the documented
// minimal setup have it: no AF_INGRESS_CONTROLLER (found from the IngressClass), no registry
// input, the engine image by its released name, on the node the way a pull would find it. The
// pull request's af.yaml tries to move the operator's settings (domain, registry, namespace
// prefix, a database secret of af's own, replicas past the limit): it comes up under the base
// branch's, the comment lists each ignored value, the registry it named gets nothing, and the
// preview URL answers. A pull request whose image cannot be pulled fails at once, naming it.
func TestActionUnderActStock(t *testing.T) {
	a := newActEnv(t, true)
	workerImage := fmt.Sprintf("af.local/shop-worker:act-%d", time.Now().UnixNano())
	if err := a.h.ImportBinaryImage(a.ctx, workerImage, a.workerPath); err != nil {
		t.Fatal(err)
	}
	ayml, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	base := strings.Replace(a.manifest, "    build:\n      context: .\n      dockerfile: web/Dockerfile\n", "    image: "+a.webImage+"\n", 1)
	base = strings.Replace(base, "    build:\n      context: worker-image\n", "    image: "+workerImage+"\n", 1)
	if strings.Contains(base, "build:") {
		t.Fatalf("the example's builds are not where the test expects them:\n%s", base)
	}
	base += "limits:\n  replicas: 1\n"

	// A registry the test owns: it must receive nothing, credentials least of all.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var contacted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			contacted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	hostile := strings.NewReplacer(
		"domain: preview.af.test", "domain: prod.af.test\n  registry: "+l.Addr().String()+"/steal",
		"namespace_prefix: af-env-", "namespace_prefix: kube-",
		"    replicas: 2\n", "    replicas: 20\n",
	).Replace(base) + "database:\n  provider: url\n  url_from: INPUT_TOKEN\n"
	workflow := `name: preview
on: [pull_request]
jobs:
  preview:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with:
          persist-credentials: false
      - uses: ./
        with:
          kubeconfig: ${{ secrets.KUBECONFIG }}
`
	env := map[string]string{}
	for k, v := range a.env {
		if k != "AF_ENGINE_IMAGE" && k != "REGISTRY" && k != "WEB_IMAGE" {
			env[k] = v
		}
	}
	const tok = "ghs_act_stock_token_0123456789"
	gh := githubtest.New(t, tok)
	gh.SetFile("main", "af.yaml", base)
	secrets := map[string]string{"GITHUB_TOKEN": tok, "KUBECONFIG": a.kubeconfig}
	runPR := func(name string, n int, manifest string) (string, error) {
		repo := a.repository(t, name, map[string]string{"action.yml": string(ayml), "af.yaml": manifest, ".github/workflows/preview.yml": workflow})
		t.Cleanup(func() {
			_, _ = a.h.Kubectl(a.ctx, "", "delete", "namespace", fmt.Sprintf("af-env-shop-pr-%d", n), "--ignore-not-found", "--wait=true")
		})
		return a.runWith(t, gh, repo, ".github/workflows/preview.yml", "pull_request",
			githubtest.PullRequestEvent(t, "opened", "acme/shop", n, strings.Repeat("4", 40), false), secrets, env, true)
	}

	out, err := runPR("hostile", 41, hostile)
	if err != nil {
		t.Fatalf("act, a pull request moving the operator's settings: %v\n%s", err, out)
	}
	c := gh.Comments(41)
	if len(c) != 1 {
		t.Fatalf("comments %+v\n%s", c, out)
	}
	body := strings.ReplaceAll(c[0].Body, "\\", "")
	if !strings.Contains(body, "Preview ready") || !strings.Contains(body, "shop-pr-41-web.preview.af.test") {
		t.Fatalf("not ready under the base branch's domain:\n%s\n%s", body, out)
	}
	for _, f := range []string{"runtime.domain", "runtime.registry", "runtime.namespace_prefix", "database", "services.worker.replicas"} {
		if !strings.Contains(body, f) {
			t.Errorf("the comment does not list %s as ignored:\n%s", f, body)
		}
	}
	if strings.Contains(out, tok) || strings.Contains(body, tok) {
		t.Error("the token appears in the log or the comment")
	}
	if n := contacted.Load(); n != 0 {
		t.Errorf("the registry the pull request named was contacted %d times", n)
	}
	if !strings.Contains(out, "ingress controller: IngressClass traefik") {
		t.Errorf("the ingress controller was not found on the cluster:\n%s", out)
	}
	if r, _ := a.h.Kubectl(a.ctx, "", "-n", "af-env-shop-pr-41", "get", "deploy", "worker", "-o", "jsonpath={.spec.replicas}"); strings.TrimSpace(r) != "1" {
		t.Errorf("worker runs %q replicas, want the base branch's limit 1", r)
	}
	// The ceilings are in place as cluster objects too: the base branch's, whatever the pull
	// request asked for.
	q, err := a.h.Kubectl(a.ctx, "", "-n", "af-env-shop-pr-41", "get", "resourcequota,limitrange", "af-ceilings", "-o",
		`jsonpath={range .items[*]}{.kind} {.spec.hard.pods} {.status.used.pods} {.spec.limits[0].default.cpu}{"\n"}{end}`)
	if err != nil || !strings.Contains(q, "ResourceQuota ") || !strings.Contains(q, "LimitRange   1") {
		t.Errorf("the environment's ResourceQuota and LimitRange af-ceilings: %v\n%s", err, q)
	}
	a.previewAnswers(t, "shop-pr-41-web.preview.af.test")

	// An image that cannot be pulled fails at once, naming it.
	unpullable := strings.Replace(base, "    image: "+a.webImage+"\n", "    image: 127.0.0.1:9/af-nothing:1\n", 1)
	start := time.Now()
	out, err = runPR("unpullable", 42, unpullable)
	t.Logf("the unpullable pull request failed after %s", time.Since(start).Round(100*time.Millisecond))
	if err == nil || !strings.Contains(out, "127.0.0.1:9/af-nothing:1 cannot be pulled") || strings.Contains(out, "ready after") || strings.Contains(out, "did not finish within") {
		t.Fatalf("act: %v, want the step failed at once naming the image\n%s", err, out)
	}
	if c := gh.Comments(42); len(c) != 1 || !strings.Contains(strings.ReplaceAll(c[0].Body, "\\", ""), "127.0.0.1:9/af-nothing:1") {
		t.Fatalf("comments %+v", c)
	}
}
