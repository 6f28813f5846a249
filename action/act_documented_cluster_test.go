package action_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/github/githubtest"
)

// TestActionUnderActDocumented runs docs/github.md's one-workflow setup (preview) and its
// teardown (preview-closed) as the page writes them, under act on the real cluster: only the
// image references point at the test cluster's registry, and act runs the actions from
// elsewhere (setup-buildx, login, build-push) as local stand-ins; the build-push
// stand-in builds with the runner's daemon and pushes to that registry, as the real one pushes
// to GHCR. The cluster is stock (no ingress-controller setting, the engine image by its
// released name). A pull request from the repository's own branch comes up from the images the
// workflow built, its URL answers, and closing it takes the environment down, all as the af-ci
// identity docs/github.md sets up (deploy/ci with its admission policies); a fork's
// pull_request run is skipped by the job's if:, touching nothing. The same workflow dispatched
// by hand with pr-number deploys the pull request's head, and deploys nothing for a fork's.
func TestActionUnderActDocumented(t *testing.T) {
	a := newActEnv(t, true)
	a.localRepos = localRepos(t, filepath.Join(a.work, "actions"))
	example, err := os.ReadFile("../examples/shop/af.yaml")
	if err != nil {
		t.Fatal(err)
	}
	webBinary, err := os.ReadFile(a.webPath)
	if err != nil {
		t.Fatal(err)
	}
	// Built as the page builds them: the repository's root as the context (examples/shop's
	// layout, af.yaml's build:), each Dockerfile in its service's directory.
	dockerfile := func(dir, bin string) string {
		return "FROM scratch\nCOPY " + dir + "/" + bin + " /" + bin + "\nUSER 65532:65532\nENTRYPOINT [\"/" + bin + "\"]\n"
	}
	repo := a.repository(t, "documented", map[string]string{
		"af.yaml":                              string(example),
		"web/Dockerfile":                       dockerfile("web", "shop-web"),
		"web/shop-web":                         string(webBinary),
		"worker/Dockerfile":                    dockerfile("worker", "shop-worker"),
		"worker/shop-worker":                   string(a.workerBinary),
		".github/workflows/preview.yml":        docWorkflow(t, "preview", a.localRepos),
		".github/workflows/preview-closed.yml": docWorkflow(t, "preview-closed", a.localRepos),
	})
	env := map[string]string{"DOCKER_HOST": a.dockerHost}
	for k, v := range a.env {
		if k != "AF_ENGINE_IMAGE" && k != "WEB_IMAGE" {
			env[k] = v
		}
	}
	const tok = "ghs_act_documented_token_0123456789"
	gh := githubtest.New(t, tok)
	gh.SetFile("main", "af.yaml", string(example))
	// AF_KUBECONFIG is the af-ci identity as the page sets it up: deploy/ci applied as written
	// (its RBAC and the admission policies that keep it to af's namespaces), a token in a
	// self-contained kubeconfig. af up and af down of the example run with nothing more.
	ci, err := a.h.CIKubeconfig(a.ctx, "..", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"GITHUB_TOKEN": tok, "AF_KUBECONFIG": ci}
	const ns = "af-env-shop-pr-51"
	t.Cleanup(func() {
		_, _ = a.h.Kubectl(a.ctx, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=true")
	})
	run := func(workflow, event string, payload []byte) string {
		t.Helper()
		out, err := a.runWith(t, gh, repo, workflow, event, payload, secrets, env, true)
		if err != nil {
			t.Fatalf("act %s %s: %v\n%s", workflow, event, err, out)
		}
		return out
	}
	head := strings.Repeat("5", 40)

	// A fork's pull_request run: the job's if: skips it before any step.
	out := run(".github/workflows/preview.yml", "pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 52, head, true))
	if strings.Contains(out, "checkout stand-in") || strings.Contains(out, "build-push stand-in") || len(gh.Calls()) != 0 {
		t.Fatalf("a fork's run was not skipped (GitHub calls %v):\n%s", gh.Calls(), out)
	}

	// The repository's own branch: built, pushed, up.
	out = run(".github/workflows/preview.yml", "pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 51, head, false))
	// (The checkout of the event's own commit is act's: it copies the repository.)
	for _, want := range []string{
		"login stand-in: registry=ghcr.io",
		"build-push stand-in: web/Dockerfile in . as " + a.env["REGISTRY"] + "/web:pr-51, push=true",
		"build-push stand-in: worker/Dockerfile in . as " + a.env["REGISTRY"] + "/worker:pr-51, push=true",
		"ingress controller: IngressClass traefik",
		"preview at http://shop-pr-51-web.preview.af.test",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the run's log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, tok) {
		t.Error("the token appears in the log")
	}
	// af-ci with deploy/ci's policies is bounded: af up's dry-run check finds nothing past
	// the previews to warn of, and no pull secret is made of the job's token.
	if strings.Contains(out, "reaches past af's namespaces") || !strings.Contains(out, "no image pull secret: the push credentials stay out of the cluster") {
		t.Errorf("af up as af-ci warned of its credential, or wrote a pull secret:\n%s", out)
	}
	c := gh.Comments(51)
	if len(c) != 1 || !strings.Contains(strings.ReplaceAll(c[0].Body, "\\", ""), "Preview ready") {
		t.Fatalf("comments %+v\n%s", c, out)
	}
	for _, svc := range []string{"web", "worker"} {
		img, _ := a.h.Kubectl(a.ctx, "", "-n", ns, "get", "deploy", svc, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if !strings.HasPrefix(img, a.env["REGISTRY"]+"/") || !strings.Contains(img, "@sha256:") {
			t.Errorf("%s runs %q, want the workflow's build from %s, by digest", svc, img, a.env["REGISTRY"])
		}
	}
	a.previewAnswers(t, "shop-pr-51-web.preview.af.test")

	// By hand: a dispatch of the same workflow on the pull request's branch (act's commit is the
	// repository's HEAD) deploys that pull request's head; one for a fork's pull request deploys
	// nothing, whatever the dispatched branch holds.
	dispatched := git(t, repo, "rev-parse", "HEAD")
	dispatch := func(n int) string {
		ev := githubtest.Event(t, "workflow_dispatch", "")
		ev["repository"].(map[string]any)["default_branch"] = "main"
		ev["ref"], ev["inputs"] = "refs/heads/feature", map[string]any{"pr-number": fmt.Sprint(n)}
		return run(".github/workflows/preview.yml", "workflow_dispatch", githubtest.ValidateEvent(t, "workflow_dispatch", "", ev))
	}
	gh.SetPull(51, "open", dispatched, false)
	gh.SetPullHead(51, "acme/shop", strings.Repeat("b", 40))
	out = dispatch(51)
	for _, want := range []string{
		"build-push stand-in: web/Dockerfile in . as " + a.env["REGISTRY"] + "/web:pr-51, push=true",
		"preview at http://shop-pr-51-web.preview.af.test",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the dispatch's log lacks %q:\n%s", want, out)
		}
	}
	if cr := gh.CheckRuns(); cr[len(cr)-1].HeadSHA != dispatched || cr[len(cr)-1].Conclusion != "success" {
		t.Errorf("check runs %+v, want the dispatch's success on %s", cr, dispatched)
	}
	if c := gh.Comments(51); len(c) != 1 {
		t.Errorf("comments %+v, want the one comment, rewritten", c)
	}
	gh.SetPull(52, "open", dispatched, false)
	gh.SetPullHead(52, "someone/shop", strings.Repeat("b", 40))
	out = dispatch(52)
	if got, _ := a.h.Kubectl(a.ctx, "", "get", "ns", "af-env-shop-pr-52", "--ignore-not-found", "-o", "name"); strings.TrimSpace(got) != "" {
		t.Fatalf("a dispatch deployed a fork's pull request: %s\n%s", got, out)
	}
	if cr := gh.CheckRuns(); cr[len(cr)-1].Conclusion != "neutral" || !strings.Contains(out, "never by a dispatch") {
		t.Errorf("check runs %+v, want neutral, and the log saying why:\n%s", cr, out)
	}

	// Closed: the documented teardown takes it down.
	out = run(".github/workflows/preview-closed.yml", "pull_request_target", githubtest.PullRequestEvent(t, "closed", "acme/shop", 51, head, false))
	if got, _ := a.h.Kubectl(a.ctx, "", "get", "ns", ns, "--ignore-not-found", "-o", "jsonpath={.status.phase}"); strings.TrimSpace(got) == "Active" {
		t.Fatalf("namespace %s still active after the documented teardown:\n%s", ns, out)
	}
	if c := gh.Comments(51); len(c) != 1 || !strings.Contains(c[0].Body, "removed") {
		t.Fatalf("comments after teardown %+v", c)
	}
}
