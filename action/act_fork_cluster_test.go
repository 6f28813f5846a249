package action_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/github/githubtest"
)

// standins are the actions from elsewhere the documented workflows use, stood in for by local
// composite actions that act runs in their place (--local-repository), so the workflows run
// with their uses: lines as the doc writes them; github.com cannot be reached here.
// upload-artifact and download-artifact keep an artifact under $AF_ARTIFACTS/<run id>/<name>;
// checkout checks out for real, from the repositories under $AF_GIT/<owner>/<name> (act itself
// only copies its working directory for a checkout of the event's own commit), and says what
// it was asked for.
var standins = map[string]string{
	"actions/checkout@v4": `name: checkout (stand-in)
inputs:
  ref: {required: false, default: ""}
  repository: {required: false, default: ""}
  persist-credentials: {required: false, default: "true"}
runs:
  using: composite
  steps:
    - shell: bash
      env:
        REF: ${{ inputs.ref }}
        REPO: ${{ inputs.repository || github.repository }}
        PERSIST: ${{ inputs.persist-credentials }}
      run: |
        set -euo pipefail
        echo "checkout stand-in: $REPO at ${REF:-$GITHUB_SHA}, persist-credentials=$PERSIST"
        git -C "$GITHUB_WORKSPACE" init -q
        git -C "$GITHUB_WORKSPACE" fetch -q "$AF_GIT/$REPO" '+refs/heads/*:refs/remotes/origin/*'
        git -C "$GITHUB_WORKSPACE" -c advice.detachedHead=false checkout -q "${REF:-$GITHUB_SHA}"
`,
	"actions/upload-artifact@v4": `name: upload-artifact (stand-in)
inputs:
  name: {required: true}
  path: {required: true}
  if-no-files-found: {required: false}
  retention-days: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        set -euo pipefail
        test -e "${{ inputs.path }}"
        dest="$AF_ARTIFACTS/${{ github.run_id }}/${{ inputs.name }}"
        mkdir -p "$dest"
        cp -r "${{ inputs.path }}/." "$dest/"
`,
	"actions/download-artifact@v4": `name: download-artifact (stand-in)
inputs:
  name: {required: true}
  path: {required: true}
  run-id: {required: true}
  github-token: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: |
        set -euo pipefail
        mkdir -p "${{ inputs.path }}"
        cp -r "$AF_ARTIFACTS/${{ inputs.run-id }}/${{ inputs.name }}/." "${{ inputs.path }}/"
`,
}

// localRepos writes the stand-ins, and this repository's action.yml as the release the doc
// names, under dir, and returns them as act's local repositories.
func localRepos(t *testing.T, dir string) map[string]string {
	t.Helper()
	ayml, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"antifailure/af@" + versionTag(t): string(ayml)}
	for k, v := range standins {
		files[k] = v
	}
	repos := map[string]string{}
	for ref, content := range files {
		d := filepath.Join(dir, strings.NewReplacer("/", "_", "@", "_").Replace(ref))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "action.yml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		repos[ref] = d
	}
	return repos
}

// docWorkflow returns the workflow named name from docs/github.md with only its registry
// pointed at the cluster's (ghcr.io cannot be reached here); every action it uses must be
// one repos stands in for.
func docWorkflow(t *testing.T, name string, repos map[string]string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/github.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(block[1], "name: "+name+"\n") {
			continue
		}
		w := strings.ReplaceAll(block[1], "registry: ghcr.io/${{ github.repository }}", "registry: ${{ env.REGISTRY }}")
		for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)`).FindAllStringSubmatch(w, -1) {
			if repos[m[1]] == "" {
				t.Fatalf("the documented %s uses %s, which the test does not stand in for", name, m[1])
			}
		}
		return w
	}
	t.Fatalf("docs/github.md has no workflow %s", name)
	return ""
}

func versionTag(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`image: docker://ghcr.io/antifailure/af:(v[^\s]+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("action.yml names no release")
	}
	return string(m[1])
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t.test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

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
	gh.SetFile(baseSHA, "af.yaml", manifest)
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
	gh.AddComment(31, "maint", "/af approve "+head[:12])
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
