package action_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/github/githubtest"
)

// TestActionUnderActForkPath runs the documented fork path under act on the real cluster: the
// fork's own pull_request run (preview-build, no secrets) builds and uploads the artifact; the
// base repository's workflow_run (preview-deploy, which holds the kubeconfig and touches no code
// of the fork) deploys nothing until a maintainer approves the commit, then exactly that build,
// under the base branch's settings.
func TestActionUnderActForkPath(t *testing.T) {
	a := newActEnv(t, true)
	a.localRepos = localRepos(t, filepath.Join(a.work, "actions"))
	// web runs the image on the node; worker is built from source by the fork's run.
	manifest := strings.Replace(a.manifest, "    build:\n      context: .\n      dockerfile: web/Dockerfile\n", "    image: "+a.webImage+"\n", 1)
	if manifest == a.manifest {
		t.Fatal("the example's web build is not where the test expects it")
	}
	// The base repository: its af.yaml and the two documented workflows, nothing else.
	baseRepo := a.repository(t, "base", map[string]string{
		"af.yaml":                              manifest,
		".github/workflows/preview-build.yml":  docWorkflow(t, "preview-build", a.localRepos),
		".github/workflows/preview-deploy.yml": docWorkflow(t, "preview-deploy", a.localRepos),
	})
	// The fork's pull request: a commit on top of the base that builds worker from source and
	// asks for a domain of its own.
	forkRepo := filepath.Join(a.work, "fork")
	git(t, a.work, "clone", "-q", baseRepo, forkRepo)
	for name, content := range map[string]string{
		"af.yaml":                  strings.Replace(manifest, "domain: preview.af.test", "domain: prod.af.test", 1),
		"worker-image/Dockerfile":  "FROM scratch\nCOPY shop-worker /shop-worker\nUSER 65532:65532\nENTRYPOINT [\"/shop-worker\"]\n",
		"worker-image/shop-worker": string(a.workerBinary),
		"FORK-CODE":                "only the fork's checkout has this\n",
	} {
		p := filepath.Join(forkRepo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	git(t, forkRepo, "add", "-A")
	git(t, forkRepo, "commit", "-q", "-m", "the fork's change")
	git(t, forkRepo, "remote", "set-url", "origin", "https://github.com/acme/shop.git")
	head := git(t, forkRepo, "rev-parse", "HEAD")
	// What GitHub serves for acme/shop: the fork's commit is reachable there (refs/pull/31/head).
	git(t, a.work, "clone", "-q", "--bare", forkRepo, filepath.Join(a.work, "git", "acme", "shop"))
	artifacts := filepath.Join(a.work, "artifacts")
	env := map[string]string{"AF_ARTIFACTS": artifacts, "AF_GIT": filepath.Join(a.work, "git")}

	const tok = "ghs_act_fork_token_0123456789"
	gh := githubtest.New(t, tok)
	baseSHA := strings.Repeat("b", 40)
	gh.SetFile("main", "af.yaml", manifest)
	gh.SetPull(31, "open", head, false)
	gh.SetPullHead(31, "someone/shop", baseSHA)
	gh.SetPermission("maint", "write")
	t.Cleanup(func() {
		_, _ = a.h.Kubectl(a.ctx, "", "delete", "namespace", "af-env-shop-pr-31", "--ignore-not-found", "--wait=true")
	})

	// 1. The fork's own run: no secret at all; it checks out the pull request's head.
	out, err := a.run(t, gh, forkRepo, ".github/workflows/preview-build.yml", "pull_request",
		githubtest.PullRequestEvent(t, "opened", "acme/shop", 31, head, true), nil, env)
	if err != nil {
		t.Fatalf("act, the fork's build run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "checkout stand-in: acme/shop at "+head+", persist-credentials=false") {
		t.Errorf("the build run did not check out the head without persisted credentials:\n%s", out)
	}
	if len(gh.Calls()) != 0 {
		t.Fatalf("the build run called GitHub: %v", gh.Calls())
	}
	runs, _ := os.ReadDir(artifacts)
	if len(runs) != 1 {
		t.Fatalf("artifacts uploaded by %d runs, want 1:\n%s", len(runs), out)
	}
	runID := runs[0].Name()
	uploaded := filepath.Join(artifacts, runID, "af-artifact")
	var meta action.Artifact
	if b, err := os.ReadFile(filepath.Join(uploaded, action.ArtifactMeta)); err != nil || json.Unmarshal(b, &meta) != nil {
		t.Fatalf("the uploaded artifact: %v %s", err, b)
	}
	if meta.PullRequest != 31 || meta.HeadSHA != head || len(meta.Images) != 1 || meta.Images[0] != "worker" {
		t.Fatalf("artifact %+v", meta)
	}
	if _, err := os.Stat(filepath.Join(uploaded, "images", "worker.tar")); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := json.Unmarshal([]byte(runID), &id); err != nil {
		t.Fatalf("run id %q: %v", runID, err)
	}
	deploy := func() (string, error) {
		return a.run(t, gh, baseRepo, ".github/workflows/preview-deploy.yml", "workflow_run",
			githubtest.WorkflowRunEvent(t, "acme/shop", id, 31, head, "someone/shop", "success"),
			map[string]string{"GITHUB_TOKEN": tok, "AF_KUBECONFIG": a.kubeconfig}, env)
	}
	noForkCode := func(out string) {
		t.Helper()
		if strings.Contains(out, "Engine API POST /build") || strings.Contains(out, "FORK-CODE") || strings.Contains(out, "checkout stand-in") {
			t.Errorf("the deploy run built or read the fork's code:\n%s", out)
		}
	}

	// 2. Nobody approved the commit: nothing is deployed, the step is neutral.
	out, err = deploy()
	if err != nil {
		t.Fatalf("act, deploy without approval: %v (a deploy that may not deploy is neutral)\n%s", err, out)
	}
	noForkCode(out)
	if ns, _ := a.h.Kubectl(a.ctx, "", "get", "ns", "af-env-shop-pr-31", "--ignore-not-found", "-o", "name"); strings.TrimSpace(ns) != "" {
		t.Fatalf("deployed without approval: %s", ns)
	}
	if cr := gh.CheckRuns(); len(cr) != 1 || cr[0].Conclusion != "neutral" || cr[0].HeadSHA != head {
		t.Fatalf("check runs %+v, want one neutral on the head", cr)
	}
	if c := gh.Comments(31); len(c) != 1 || !strings.Contains(strings.ReplaceAll(c[0].Body, "\\", ""), "/af approve "+head) {
		t.Fatalf("comments %+v, want one naming the approval", c)
	}

	// 3. A maintainer approves this very commit: its build is deployed, under the base
	// branch's settings.
	gh.AddComment(31, "maint", "/af approve "+head)
	out, err = deploy()
	if err != nil {
		t.Fatalf("act, deploy after approval: %v\n%s", err, out)
	}
	noForkCode(out)
	if !strings.Contains(out, "deploying the build of pull request #31 at "+head) || !strings.Contains(out, "approved by maint") {
		t.Errorf("the deploy run does not say what it deployed and who approved it:\n%s", out)
	}
	var c []githubtest.Comment
	for _, cm := range gh.Comments(31) {
		if cm.Login != "maint" {
			c = append(c, cm)
		}
	}
	body := strings.ReplaceAll(c[0].Body, "\\", "")
	if len(c) != 1 || !strings.Contains(body, "Preview ready") || !strings.Contains(body, "shop-pr-31-web.preview.af.test") || !strings.Contains(body, "runtime.domain") {
		t.Fatalf("comments %+v, want the preview ready at the base branch's domain, the pull request's listed as ignored", c)
	}
	if cr := gh.CheckRuns(); cr[len(cr)-1].Conclusion != "success" || cr[len(cr)-1].HeadSHA != head {
		t.Fatalf("check runs %+v", cr)
	}
	if ns, _ := a.h.Kubectl(a.ctx, "", "get", "ns", "af-env-shop-pr-31", "--ignore-not-found", "-o", "name"); strings.TrimSpace(ns) == "" {
		t.Fatal("no namespace after the approved deploy")
	}

	// 4. The race: the fork pushes after the approval. The approved build's deploy run again (a
	// re-run, or one that was queued) now deploys nothing: the head it was built from moved.
	moved := strings.Repeat("e", 40)
	gh.SetPull(31, "open", moved, false)
	checks := len(gh.CheckRuns())
	out, err = deploy()
	if err != nil {
		t.Fatalf("act, deploy after a push: %v\n%s", err, out)
	}
	noForkCode(out)
	if !strings.Contains(out, "head is now "+moved) {
		t.Errorf("the deploy run after a push does not say the head moved:\n%s", out)
	}
	if cr := gh.CheckRuns(); len(cr) != checks || cr[len(cr)-1].HeadSHA != head || cr[len(cr)-1].Conclusion != "success" {
		t.Fatalf("check runs %+v: the run of a commit that is no longer the head wrote a check run", cr)
	}
}
