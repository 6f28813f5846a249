package action_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/github/report"
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
	noForkCode := func(out string) {
		t.Helper()
		if strings.Contains(out, "Engine API POST /build") || strings.Contains(out, "FORK-CODE") || strings.Contains(out, "checkout stand-in") {
			t.Errorf("the deploy run built or read the fork's code:\n%s", out)
		}
	}

	// forged copies the fork's artifact under a run id of its own, changed by change: what a
	// fork's run can upload, whatever its workflow says.
	next := id
	forged := func(change func(dir string) error) int64 {
		t.Helper()
		next++
		dir := filepath.Join(artifacts, fmt.Sprint(next), "af-artifact")
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("cp", "-a", uploaded, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, b)
		}
		if err := change(dir); err != nil {
			t.Fatal(err)
		}
		return next
	}
	deployRun := func(run int64) (string, error) {
		return a.run(t, gh, baseRepo, ".github/workflows/preview-deploy.yml", "workflow_run",
			githubtest.WorkflowRunEvent(t, "acme/shop", run, 31, head, "someone/shop", "success"),
			map[string]string{"GITHUB_TOKEN": tok, "AF_KUBECONFIG": a.kubeconfig}, env)
	}
	deploy := func() (string, error) { return deployRun(id) }
	edited := func(change func(m map[string]any)) func(dir string) error {
		return func(dir string) error {
			p := filepath.Join(dir, action.ArtifactMeta)
			var m map[string]any
			b, err := os.ReadFile(p)
			if err == nil {
				err = json.Unmarshal(b, &m)
			}
			if err != nil {
				return err
			}
			change(m)
			b, _ = json.Marshal(m)
			return os.WriteFile(p, b, 0o644)
		}
	}

	// 2. Nobody approved the commit: nothing is deployed, the step is neutral. What must not
	// count as an approval is there: a prefix of the commit id (a fork can make a commit whose
	// id starts with any seven digits), the command quoted and fenced, and a comment edited into
	// one after it was written; so is a base commit and a stale branch whose af.yaml says
	// fork_policy: always (the pull request picks its base; the default branch governs it).
	gh.AddComment(31, "maint", "/af approve "+head[:7])
	gh.AddComment(31, "maint", "> /af approve "+head)
	gh.AddComment(31, "maint", "```\n/af approve "+head+"\n```")
	gh.EditComment(gh.AddComment(31, "maint", "looks fine to me"), "/af approve "+head)
	always := strings.Replace(manifest, "fork_policy: label", "fork_policy: always", 1)
	if always == manifest {
		t.Fatal("the example's fork_policy is not where the test expects it")
	}
	gh.SetFile(baseSHA, "af.yaml", always)
	gh.SetFile("stale", "af.yaml", always)
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
	if c := afComments(gh.Comments(31)); len(c) != 1 || !strings.Contains(strings.ReplaceAll(c[0].Body, "\\", ""), "/af approve "+head) {
		t.Fatalf("comments %+v, want one naming the approval", c)
	}

	// Artifacts the fork shaped by hand (its run uploads whatever its workflow writes), each
	// under a run of its own: an oversize description, one naming no repository, and an
	// af.yaml that does not parse. None deploys; the first two are refused, the last only asks
	// for the approval, as before, quoting nothing of the fork's file.
	for _, c := range []struct {
		name    string
		change  func(dir string) error
		refused string // in the log; "" when the run is neutral (the approval request)
	}{
		{"the description oversize", edited(func(m map[string]any) { m["padding"] = strings.Repeat(" ", action.MaxArtifactMeta) }), "af reads at most"},
		{"no repository", edited(func(m map[string]any) { delete(m, "repository") }), "names no repository"},
		{"af.yaml unparsable", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "af.yaml"), []byte("services: {web: [FORK-TEXT-31\n"), 0o644)
		}, ""},
	} {
		checks := len(gh.CheckRuns())
		out, err := deployRun(forged(c.change))
		noForkCode(out)
		if ns, _ := a.h.Kubectl(a.ctx, "", "get", "ns", "af-env-shop-pr-31", "--ignore-not-found", "-o", "name"); strings.TrimSpace(ns) != "" {
			t.Fatalf("%s: deployed: %s\n%s", c.name, ns, out)
		}
		if c.refused != "" && (err == nil || !strings.Contains(out, c.refused)) {
			t.Errorf("%s: act %v, want the step refused with %q:\n%s", c.name, err, c.refused, out)
		}
		if c.refused == "" {
			if cr := gh.CheckRuns(); err != nil || len(cr) != checks+1 || cr[len(cr)-1].Conclusion != "neutral" {
				t.Errorf("%s: act %v, check runs %+v, want one more, neutral:\n%s", c.name, err, cr, out)
			}
		}
		if seen := fmt.Sprintf("%s %+v %+v", out, gh.CheckRuns(), gh.Comments(31)); strings.Contains(seen, "FORK-TEXT-31") {
			t.Errorf("%s: the log, a check run or a comment quotes the fork's af.yaml", c.name)
		}
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

	// After the approval, what the approved build's deploy reads next: links out of the
	// artifact, in af.yaml's place and in an image's, are refused, their targets never read;
	// and a rebuild of the approved commit with another image is not covered by the approval
	// (the deployment recorded the images it approved). Nothing of the running preview changes.
	outside := filepath.Join(a.work, "outside.yaml")
	if err := os.WriteFile(outside, []byte("OUTSIDE-THE-ARTIFACT-31\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	running, _ := a.h.Kubectl(a.ctx, "", "-n", "af-env-shop-pr-31", "get", "deploy", "worker", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	for _, c := range []struct {
		name    string
		change  func(dir string) error
		refused string
	}{
		{"af.yaml a link out of the artifact", func(dir string) error {
			_ = os.Remove(filepath.Join(dir, "af.yaml"))
			return os.Symlink(outside, filepath.Join(dir, "af.yaml"))
		}, "af.yaml in artifact is a link: an artifact is data"},
		{"an image archive a link", func(dir string) error {
			p := filepath.Join(dir, "images", "worker.tar")
			_ = os.Remove(p)
			return os.Symlink(outside, p)
		}, "images/worker.tar in artifact is a link: an artifact is data"},
		{"the approved commit rebuilt with another image", rebuilt, "so that approval does not cover it"},
	} {
		out, err := deployRun(forged(c.change))
		noForkCode(out)
		if !strings.Contains(out, c.refused) || strings.Contains(out, "OUTSIDE-THE-ARTIFACT-31") {
			t.Errorf("%s: act %v, want %q and nothing of the link's target:\n%s", c.name, err, c.refused, out)
		}
		if img, _ := a.h.Kubectl(a.ctx, "", "-n", "af-env-shop-pr-31", "get", "deploy", "worker", "-o", "jsonpath={.spec.template.spec.containers[0].image}"); img != running {
			t.Fatalf("%s: worker now runs %s, not the approved %s", c.name, img, running)
		}
	}

	// 4. The race: the fork pushes after the approval. The approved build's deploy run again (a
	// re-run, or one that was queued) now deploys nothing: the head it was built from moved.
	moved := strings.Repeat("e", 40)
	gh.SetPull(31, "open", moved, false)
	before := gh.CheckRuns()
	out, err = deploy()
	if err != nil {
		t.Fatalf("act, deploy after a push: %v\n%s", err, out)
	}
	noForkCode(out)
	if !strings.Contains(out, "head is now "+moved) {
		t.Errorf("the deploy run after a push does not say the head moved:\n%s", out)
	}
	if cr := gh.CheckRuns(); len(cr) != len(before) || cr[len(cr)-1].ID != before[len(before)-1].ID || cr[len(cr)-1].HeadSHA != head {
		t.Fatalf("check runs %+v: the run of a commit that is no longer the head wrote a check run", cr)
	}
}

// afComments are af's own comments among c (the marker first), without the maintainers'.
func afComments(c []githubtest.Comment) []githubtest.Comment {
	var out []githubtest.Comment
	for _, cm := range c {
		if strings.HasPrefix(cm.Body, report.Marker) {
			out = append(out, cm)
		}
	}
	return out
}

// rebuilt replaces the artifact's worker image with another build of it (one label more): the
// same commit, another image id.
func rebuilt(dir string) error {
	p := filepath.Join(dir, "images", "worker.tar")
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	if cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	cf.Config.Labels["rebuilt"] = "yes"
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag("af.local/worker:rebuilt")
	if err != nil {
		return err
	}
	// The image is read from p as it is written: write beside it, then replace it.
	if err := tarball.WriteToFile(p+".new", tag, img); err != nil {
		return err
	}
	return os.Rename(p+".new", p)
}
