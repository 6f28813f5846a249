package action_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/githubtest"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/runtime/runtimetest"
)

// A fork's own pull_request run builds without secrets: no kubeconfig, no token, nothing
// written to GitHub; the artifact holds its af.yaml and which commit of which pull request it
// is.
func TestForkBuildRunWritesTheArtifact(t *testing.T) {
	gh := githubtest.New(t, token)
	j := newJob(t, gh, &runtimetest.Fake{}, shop)
	j.inputs = map[string]string{"command": "build"}
	j.event("pull_request", githubtest.PullRequestEvent(t, "synchronize", "acme/shop", 11, sha1, true))
	o, log := j.run()
	if o.Exit != 0 {
		t.Fatalf("exit %d (%v)\n%s", o.Exit, o.Err, log)
	}
	if len(gh.Calls()) != 0 || j.rtMade != 0 {
		t.Fatalf("the build run touched GitHub (%v) or a cluster (%d)", gh.Calls(), j.rtMade)
	}
	dir := filepath.Join(j.dir, "af-artifact")
	if b, err := os.ReadFile(filepath.Join(dir, "af.yaml")); err != nil || string(b) != shop {
		t.Fatalf("the artifact's af.yaml: %v %q", err, b)
	}
	var a action.Artifact
	b, err := os.ReadFile(filepath.Join(dir, action.ArtifactMeta))
	if err != nil || json.Unmarshal(b, &a) != nil {
		t.Fatalf("%s: %v %s", action.ArtifactMeta, err, b)
	}
	if a.PullRequest != 11 || a.HeadSHA != sha1 || a.Repository != "acme/shop" || len(a.Images) != 0 {
		t.Fatalf("artifact %+v", a)
	}
	if !strings.Contains(j.summary, "/af approve "+sha1) {
		t.Fatalf("the summary does not say how to approve: %q", j.summary)
	}
}

// deployJob is the privileged workflow_run job: the base branch checked out (baseShop), the
// build run's artifact downloaded (the pull request's af.yaml, web's image, the commit).
func deployJob(t *testing.T, gh *githubtest.Server, built, event string, prText string) (*job, *runtimetest.Fake) {
	t.Helper()
	gh.SetFile("main", "af.yaml", baseShop)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-11")}
	j := newJob(t, gh, rt, baseShop)
	dir := filepath.Join(j.dir, "artifact")
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		t.Fatal(err)
	}
	meta, _ := json.Marshal(action.Artifact{Repository: "acme/shop", PullRequest: 11, HeadSHA: built, Images: []string{"web"}})
	for name, content := range map[string]string{"af.yaml": prText, action.ArtifactMeta: string(meta)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	imageArchive(t, filepath.Join(dir, "images", "web.tar"), "web, as built")
	j.inputs["artifact"] = "artifact"
	j.event("workflow_run", githubtest.WorkflowRunEvent(t, "acme/shop", 4242, 11, event, "someone/shop", "success"))
	return j, rt
}

// The fork path's deploy job: only the commit a maintainer approved, still the pull request's
// head, is deployed, from the artifact; every other case deploys nothing and leaves the step
// neutral.
func TestForkDeployRun(t *testing.T) {
	prText := strings.Replace(baseShop, "domain: preview.acme.test", "domain: prod.acme.test", 1)
	cases := []struct {
		name     string
		head     string // the pull request's head now
		built    string // the artifact's commit
		comments map[string]string
		perms    map[string]string
		deploys  bool
		why      string
	}{
		{"approved by a maintainer", sha1, sha1, map[string]string{"maint": "/af approve " + sha1}, map[string]string{"maint": "write"}, true, ""},
		{"not approved", sha1, sha1, nil, nil, false, "/af approve " + sha1},
		{"approved by a reader", sha1, sha1, map[string]string{"drive-by": "/af approve " + sha1}, map[string]string{"drive-by": "read"}, false, "nobody with write access"},
		// A fork can push a commit whose id starts with any 7 digits in minutes: only the full
		// id approves.
		{"a prefix of the head's id", sha1, sha1, map[string]string{"maint": "/af approve " + sha1[:12]}, map[string]string{"maint": "write"}, false, "nobody with write access"},
		{"approval in a code block", sha1, sha1, map[string]string{"maint": "```\n/af approve " + sha1 + "\n```"}, map[string]string{"maint": "write"}, false, "nobody with write access"},
		{"approval quoted in a reply", sha1, sha1, map[string]string{"maint": "> /af approve " + sha1}, map[string]string{"maint": "write"}, false, "nobody with write access"},
		{"approval quoted, not on its own line", sha1, sha1, map[string]string{"maint": "please run `/af approve " + sha1 + "` once reviewed"}, map[string]string{"maint": "admin"}, false, "nobody with write access"},
		// The race: the maintainer reviewed and approved commit 2, but a push made 1 the
		// head; the build of 1 is deployed by nobody's approval.
		{"approval names another commit", sha1, sha1, map[string]string{"maint": "/af approve " + sha2}, map[string]string{"maint": "write"}, false, "nobody with write access"},
		// A push after the build: the approved commit is no longer the head.
		{"head moved after the build", sha2, sha1, map[string]string{"maint": "/af approve " + sha1}, map[string]string{"maint": "write"}, false, "head is now " + sha2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gh := githubtest.New(t, token)
			gh.SetPull(11, "open", c.head, false)
			gh.SetPullHead(11, "someone/shop", baseSHA)
			for login, body := range c.comments {
				gh.AddComment(11, login, body)
			}
			for login, p := range c.perms {
				gh.SetPermission(login, p)
			}
			j, rt := deployJob(t, gh, c.built, c.built, prText)
			o, log := j.run()
			if o.Exit != 0 {
				t.Fatalf("exit %d (%v): a deploy run that may not deploy is neutral\n%s", o.Exit, o.Err, log)
			}
			var up *runtimetest.Call
			for _, call := range acts(rt) {
				if call.Method == "Up" {
					up = &call
				}
			}
			if (up != nil) != c.deploys {
				t.Fatalf("deployed: %v, want %v\n%s", up != nil, c.deploys, log)
			}
			if !c.deploys {
				if !errors.Is(o.Err, failure.ForkNotApproved) || !strings.Contains(o.Err.Error(), c.why) {
					t.Fatalf("err %v, want ForkNotApproved saying %q", o.Err, c.why)
				}
				return
			}
			if up.Spec.Archives["web"] != filepath.Join(j.dir, "artifact", "images", "web.tar") || up.Spec.PullRequest != 11 {
				t.Fatalf("Up got archives %v for pull request %d", up.Spec.Archives, up.Spec.PullRequest)
			}
			if up.Spec.Manifest.Runtime.Domain != "preview.acme.test" {
				t.Fatalf("the artifact's af.yaml set the domain: %q", up.Spec.Manifest.Runtime.Domain)
			}
			if cs := gh.CheckRuns(); len(cs) != 1 || cs[0].HeadSHA != sha1 || cs[0].Conclusion != "success" {
				t.Fatalf("check runs %+v, want one on the deployed commit", cs)
			}
		})
	}
}

// An artifact from another run than the event's is refused: what is deployed is what the run
// this event reports built.
func TestForkDeployRefusesAnotherRunsArtifact(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.SetPull(11, "open", sha2, false)
	gh.SetPullHead(11, "someone/shop", baseSHA)
	j, rt := deployJob(t, gh, sha1, sha2, baseShop)
	o, log := j.run()
	if !errors.Is(o.Err, failure.ActionInputInvalid) || len(acts(rt)) != 0 {
		t.Fatalf("err %v, runtime calls %v\n%s", o.Err, acts(rt), log)
	}
}

// The artifact is the fork's data: nothing in it is followed out of it, nothing in it is read
// past its bound, and a description that names no repository, or an event that names no head
// repository, deploys nothing. Approved throughout, so only the artifact decides; what lies
// outside it never reaches the log, the check or the comment.
func TestForkArtifactIsData(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	const secret = "name: operator-secret-9f1c"
	if err := os.WriteFile(outside, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	meta := func(a action.Artifact) string { b, _ := json.Marshal(a); return string(b) }
	good := action.Artifact{Repository: "acme/shop", PullRequest: 11, HeadSHA: sha1, Images: []string{"web"}}
	cases := []struct {
		name     string
		tune     func(t *testing.T, dir string)
		headRepo string
		why      string
	}{
		{"af.yaml is a link out of the artifact", func(t *testing.T, dir string) { relink(t, outside, filepath.Join(dir, "af.yaml")) }, "", "af.yaml in artifact is a link"},
		{"af-artifact.json is a link", func(t *testing.T, dir string) {
			write(t, outside, meta(good))
			relink(t, outside, filepath.Join(dir, action.ArtifactMeta))
		}, "", "af-artifact.json in artifact is a link"},
		{"images is a link to a directory", func(t *testing.T, dir string) {
			other := t.TempDir()
			write(t, filepath.Join(other, "web.tar"), "an image archive elsewhere")
			if err := os.RemoveAll(filepath.Join(dir, "images")); err != nil {
				t.Fatal(err)
			}
			relink(t, other, filepath.Join(dir, "images"))
		}, "", "images in artifact is a link"},
		{"an image is a link", func(t *testing.T, dir string) { relink(t, outside, filepath.Join(dir, "images", "web.tar")) }, "", "images/web.tar in artifact is a link"},
		{"af.yaml is a directory", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "af.yaml"))
			if err := os.Mkdir(filepath.Join(dir, "af.yaml"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "", "af.yaml in artifact is not a regular file"},
		{"af-artifact.json too large", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, action.ArtifactMeta), meta(good)+strings.Repeat(" ", action.MaxArtifactMeta))
		}, "", "af reads at most 65536"},
		{"af.yaml too large", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "af.yaml"), baseShop+"#"+strings.Repeat("x", 1<<20)+"\n")
		}, "", "af reads at most 1048576"},
		{"no repository named", func(t *testing.T, dir string) {
			a := good
			a.Repository = ""
			write(t, filepath.Join(dir, action.ArtifactMeta), meta(a))
		}, "", "names no repository"},
		{"the event names no head repository", nil, "-", "names no head repository"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gh := githubtest.New(t, token)
			gh.SetPull(11, "open", sha1, false)
			gh.SetPullHead(11, "someone/shop", baseSHA)
			gh.AddComment(11, "maint", "/af approve "+sha1)
			gh.SetPermission("maint", "write")
			j, rt := deployJob(t, gh, sha1, sha1, baseShop)
			if c.tune != nil {
				c.tune(t, filepath.Join(j.dir, "artifact"))
			}
			if c.headRepo == "-" {
				j.event("workflow_run", githubtest.WorkflowRunEvent(t, "acme/shop", 4242, 11, sha1, "", "success"))
			}
			o, log := j.run()
			if !errors.Is(o.Err, failure.ActionInputInvalid) || !strings.Contains(o.Err.Error(), c.why) {
				t.Fatalf("err %v, want %s saying %q\n%s", o.Err, failure.ActionInputInvalid.Code, c.why, log)
			}
			if len(acts(rt)) != 0 || j.rtMade != 0 {
				t.Fatalf("the runtime was used: %v", acts(rt))
			}
			shown := log
			for _, cm := range gh.Comments(11) {
				shown += cm.Body
			}
			for _, cr := range gh.CheckRuns() {
				shown += cr.Summary + cr.Text + fmt.Sprint(cr.Annotations)
			}
			if strings.Contains(shown, "operator-secret-9f1c") {
				t.Fatalf("a file outside the artifact was read and shown:\n%s", shown)
			}
		})
	}
}

// An unapproved fork with an invalid af.yaml gets what every unapproved fork gets: the neutral
// check and the request for an approval. Its af.yaml is not read, so nothing quotes it.
func TestUnapprovedForkGetsNothingOfItsOwn(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.SetPull(11, "open", sha1, false)
	gh.SetPullHead(11, "someone/shop", baseSHA)
	const text = "name: shop\nservices:\n  web: {image: x, port: 99999}\nquoted-by-af-7c1e: [\n"
	j, rt := deployJob(t, gh, sha1, sha1, text)
	o, log := j.run()
	if o.Exit != 0 || !errors.Is(o.Err, failure.ForkNotApproved) || len(acts(rt)) != 0 {
		t.Fatalf("exit %d err %v runtime %v\n%s", o.Exit, o.Err, acts(rt), log)
	}
	cs := gh.CheckRuns()
	if len(cs) != 1 || cs[0].Conclusion != "neutral" || len(cs[0].Annotations) != 0 {
		t.Fatalf("check runs %+v, want one neutral without annotations", cs)
	}
	cm := gh.Comments(11)
	if len(cm) != 1 || !strings.Contains(strings.ReplaceAll(cm[0].Body, "\\", ""), "/af approve "+sha1) || !strings.Contains(cm[0].Body, "re-run") {
		t.Fatalf("comments %+v, want one asking for /af approve of the full id and a re-run", cm)
	}
	if shown := log + cm[0].Body + cs[0].Summary + cs[0].Text; strings.Contains(shown, "quoted-by-af") || strings.Contains(shown, "99999") {
		t.Fatalf("the fork's af.yaml was quoted:\n%s", shown)
	}
}

func relink(t *testing.T, target, link string) {
	t.Helper()
	os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// imageArchive writes a docker archive of an image holding one file with content: another
// content, another image id.
func imageArchive(t *testing.T, path, content string) {
	t.Helper()
	img, err := images.Files{Contents: map[string][]byte{"/content": []byte(content)}, Entrypoint: []string{"/content"}}.Image()
	if err != nil {
		t.Fatal(err)
	}
	if err := images.WriteArchive(path, "web:built", img); err != nil {
		t.Fatal(err)
	}
}

// An approval binds the images it deployed: the same commit built again with other images is
// not deployed under it (the step is neutral and says why), the same images are, and a new
// approval covers the new build.
func TestApprovalBindsItsImages(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.SetPull(11, "open", sha1, false)
	gh.SetPullHead(11, "someone/shop", baseSHA)
	gh.SetPermission("maint", "write")
	gh.AddComment(11, "maint", "/af approve "+sha1)
	deploy := func(content string) (action.Outcome, int, string) {
		t.Helper()
		j, rt := deployJob(t, gh, sha1, sha1, baseShop)
		imageArchive(t, filepath.Join(j.dir, "artifact", "images", "web.tar"), content)
		o, log := j.run()
		ups := 0
		for _, c := range acts(rt) {
			if c.Method == "Up" {
				ups++
			}
		}
		return o, ups, log
	}
	if o, ups, log := deploy("web, first build"); ups != 1 || o.Err != nil {
		t.Fatalf("the approved build was not deployed: %v\n%s", o.Err, log)
	}
	if d := gh.Deployments(); len(d) != 1 || d[0].Payload == nil {
		t.Fatalf("deployments %+v: the binding is not recorded", d)
	}
	if o, ups, log := deploy("web, first build"); ups != 1 || o.Err != nil {
		t.Fatalf("the same images again were not deployed: %v\n%s", o.Err, log)
	}
	comments, checks := gh.Comments(11), gh.CheckRuns()
	o, ups, log := deploy("web, rebuilt with something else in it")
	if ups != 0 || o.Exit != 0 || !errors.Is(o.Err, failure.ForkNotApproved) || !strings.Contains(o.Err.Error(), "other images") {
		t.Fatalf("a rebuild with other images: deployed %d, exit %d, err %v, want none, neutral, ForkNotApproved\n%s", ups, o.Exit, o.Err, log)
	}
	// The approved build still runs: the comment still says so; the rebuild's check run is neutral.
	if c := gh.Comments(11); len(c) != len(comments) || c[len(c)-1].Body != comments[len(comments)-1].Body {
		t.Errorf("the refused rebuild rewrote the comment:\n%s", c[len(c)-1].Body)
	}
	if cr := gh.CheckRuns(); len(cr) != len(checks)+1 || cr[len(cr)-1].Conclusion != "neutral" || !strings.Contains(cr[len(cr)-1].Summary, "keeps running the approved one") {
		t.Errorf("check runs %+v, want one more, neutral, saying the approved build keeps running", cr)
	}
	gh.AddComment(11, "maint", "/af approve "+sha1)
	if o, ups, log := deploy("web, rebuilt with something else in it"); ups != 1 || o.Err != nil {
		t.Fatalf("a new approval did not cover the rebuild: %v\n%s", o.Err, log)
	}
}
