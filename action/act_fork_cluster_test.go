package action_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/github/githubtest"
)

// standins are the actions from elsewhere the documented workflows use, stood in for by local
// composite actions (github.com cannot be reached here): upload-artifact and download-artifact
// keep an artifact under $AF_ARTIFACTS/<run id>/<name>; checkout has nothing to fetch (act
// runs the job in a copy of the repository at the commit the test made) and says what it was
// asked for.
var standins = map[string]string{
	".github/standin/checkout/action.yml": `name: checkout (stand-in)
inputs:
  ref: {required: false}
  repository: {required: false}
  persist-credentials: {required: false}
runs:
  using: composite
  steps:
    - shell: bash
      run: echo "checkout stand-in ref=${{ inputs.ref }} repository=${{ inputs.repository }} persist-credentials=${{ inputs.persist-credentials }}"
`,
	".github/standin/upload-artifact/action.yml": `name: upload-artifact (stand-in)
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
	".github/standin/download-artifact/action.yml": `name: download-artifact (stand-in)
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

// docWorkflow returns the workflow named name from docs/github.md, with only the uses: lines
// of actions from elsewhere pointed at this repository's action (./) and the stand-ins, and
// the registry at the cluster's.
func docWorkflow(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../docs/github.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		if !strings.HasPrefix(block[1], "name: "+name+"\n") {
			continue
		}
		w := strings.NewReplacer(
			"uses: antifailure/af@"+strings.TrimPrefix(versionTag(t), "v"), "uses: ./",
			"uses: antifailure/af@"+versionTag(t), "uses: ./",
			"uses: actions/upload-artifact@v4", "uses: ./.github/standin/upload-artifact",
			"uses: actions/checkout@v4", "uses: ./.github/standin/checkout",
			"uses: actions/download-artifact@v4", "uses: ./.github/standin/download-artifact",
			"registry: ghcr.io/${{ github.repository }}", "registry: ${{ env.REGISTRY }}",
		).Replace(block[1])
		if regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(antifailure/af@|actions/)`).MatchString(w) {
			t.Fatalf("the documented %s uses an action the test cannot stand in for:\n%s", name, w)
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

// TestActionUnderActForkPath runs the documented fork path under act on the real cluster: the
// fork's own pull_request run (preview-build, no secrets) builds and uploads the artifact; the
// base repository's workflow_run (preview-deploy, which holds the kubeconfig and touches no code
// of the fork) deploys nothing until a maintainer approves the commit, then exactly that build,
// under the base branch's settings.
func TestActionUnderActForkPath(t *testing.T) {
	a := newActEnv(t, true)
	ayml, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	// web runs the image on the node; worker is built from source by the fork's run.
	manifest := strings.Replace(a.manifest, "    build:\n      context: .\n      dockerfile: web/Dockerfile\n", "    image: "+a.webImage+"\n", 1)
	if manifest == a.manifest {
		t.Fatal("the example's web build is not where the test expects it")
	}
	prManifest := strings.Replace(manifest, "domain: preview.af.test", "domain: prod.af.test", 1)
	fork := map[string]string{
		"action.yml":                          string(ayml),
		"af.yaml":                             prManifest,
		"worker-image/Dockerfile":             "FROM scratch\nCOPY shop-worker /shop-worker\nUSER 65532:65532\nENTRYPOINT [\"/shop-worker\"]\n",
		"worker-image/shop-worker":            string(a.workerBinary),
		"FORK-CODE":                           "only the fork's checkout has this\n",
		".github/workflows/preview-build.yml": docWorkflow(t, "preview-build"),
	}
	base := map[string]string{
		"action.yml":                           string(ayml),
		"af.yaml":                              manifest,
		".github/workflows/preview-deploy.yml": docWorkflow(t, "preview-deploy"),
	}
	for k, v := range standins {
		fork[k], base[k] = v, v
	}
	forkRepo, baseRepo := a.repository(t, "fork", fork), a.repository(t, "base", base)
	artifacts := filepath.Join(a.work, "artifacts")
	env := map[string]string{"AF_ARTIFACTS": artifacts}

	const tok = "ghs_act_fork_token_0123456789"
	gh := githubtest.New(t, tok)
	head, baseSHA := strings.Repeat("d", 40), strings.Repeat("b", 40)
	gh.SetFile(baseSHA, "af.yaml", manifest)
	gh.SetPull(31, "open", head, false)
	gh.SetPullHead(31, "someone/shop", baseSHA)
	gh.SetPermission("maint", "write")
	t.Cleanup(func() {
		_, _ = a.h.Kubectl(a.ctx, "", "delete", "namespace", "af-env-shop-pr-31", "--ignore-not-found", "--wait=true")
	})

	// 1. The fork's own run: no secret at all.
	out, err := a.run(t, gh, forkRepo, ".github/workflows/preview-build.yml", "pull_request",
		githubtest.PullRequestEvent(t, "opened", "acme/shop", 31, head, true), nil, env)
	if err != nil {
		t.Fatalf("act, the fork's build run: %v\n%s", err, out)
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
		if strings.Contains(out, "Engine API POST /build") || strings.Contains(out, "FORK-CODE") {
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
	c := gh.Comments(31)
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
}
