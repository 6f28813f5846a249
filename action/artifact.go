package action

// The fork path: a fork's pull request is built where no secret is and deployed where the
// secrets are. Its own pull_request run (read-only token, no secrets) runs command build: the
// images built from its code, written with its af.yaml into the artifact directory, which the
// workflow uploads. A workflow_run job of the base repository (secrets, the kubeconfig) checks
// out only the base branch, downloads that run's artifact and runs command up with it: no step
// of it touches the fork's code, nothing is built there, and what it deploys is exactly the
// commit the build ran for, checked against GitHub at run time, once a maintainer approved
// that commit (approval.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/preview"
)

// ArtifactMeta names the artifact's description in its directory.
const ArtifactMeta = "af-artifact.json"

// Artifact describes what the build run handed over. Its af.yaml is "af.yaml" and each
// service's image "images/<service>.tar" in the same directory.
type Artifact struct {
	Repository  string   `json:"repository"`
	PullRequest int      `json:"pull_request"`
	HeadSHA     string   `json:"head_sha"`
	Images      []string `json:"images"` // the services built, sorted
}

var (
	shaForm     = regexp.MustCompile(`^[0-9a-f]{40}$`)
	serviceForm = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func (r *run) artifactDir() string { return filepath.Join(r.workspace(), r.in.Artifact) }

// buildArtifact is command build: the pull request's images built and written, with its
// af.yaml and which commit they are, into the artifact directory. It needs no secret.
func (r *run) buildArtifact(ctx context.Context) error {
	if r.ev.PullRequest == 0 || r.ev.HeadSHA == "" {
		return failure.Newf(failure.EventUnsupported, "command build runs for a pull request's pull_request event; this run is for %s", r.ev.Name)
	}
	if err := r.loadManifest(); err != nil {
		return err
	}
	dir := r.artifactDir()
	if err := os.RemoveAll(dir); err != nil {
		return failure.New(failure.Internal, "emptying the artifact directory "+dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return failure.New(failure.Internal, "making the artifact directory "+dir, err)
	}
	src, err := os.ReadFile(filepath.Join(r.workspace(), r.in.Manifest))
	if err != nil {
		return failure.New(failure.Internal, "reading "+r.in.Manifest, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "af.yaml"), src, 0o644); err != nil {
		return failure.New(failure.Internal, "writing the artifact's af.yaml", err)
	}
	tars := map[string]string{}
	if err := preview.Build(ctx, r.getenv, r.logf, r.res.Manifest, r.manifestDir(), r.in.Images, tars); err != nil {
		return err
	}
	a := Artifact{Repository: r.d.Getenv("GITHUB_REPOSITORY"), PullRequest: r.ev.PullRequest, HeadSHA: r.ev.HeadSHA, Images: slices.Sorted(maps.Keys(tars))}
	for _, svc := range a.Images {
		if err := copyFile(tars[svc], filepath.Join(dir, "images", svc+".tar")); err != nil {
			return failure.New(failure.Internal, "writing "+svc+"'s image into the artifact", err)
		}
	}
	b, _ := json.MarshalIndent(a, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, ArtifactMeta), append(b, '\n'), 0o644); err != nil {
		return failure.New(failure.Internal, "writing "+ArtifactMeta, err)
	}
	r.logf("artifact %s: af.yaml and %d image(s) of pull request #%d at %s", r.in.Artifact, len(a.Images), a.PullRequest, a.HeadSHA)
	if r.d.Getenv("GITHUB_STEP_SUMMARY") != "" {
		r.gha.AddStepSummary(fmt.Sprintf("## af: built pull request #%d at `%s`\n\n%d image(s) and its af.yaml are in the artifact `%s`; the deploy job runs them once a maintainer approves this commit (`/af approve %s`).\n",
			a.PullRequest, a.HeadSHA[:min(7, len(a.HeadSHA))], len(a.Images), r.in.Artifact, a.HeadSHA))
	}
	if r.d.Getenv("GITHUB_OUTPUT") != "" {
		r.gha.SetOutput("artifact", r.in.Artifact)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// What the deploy job reads of an artifact at the most (docs/github.md): its description, its
// af.yaml (manifest.MaxSize) and each image archive.
const (
	MaxArtifactMeta  = 64 << 10
	MaxArtifactImage = 8 << 30
)

// artifactFile opens name (slash-separated, inside the artifact directory) as data: never
// through a link, at any step of its path or the directory's own, only a regular file, and
// refused when it is larger than limit bytes. Nothing outside the directory can be read
// through it (os.Root), whatever the fork put in its artifact.
func (r *run) artifactFile(name string, limit int64) (*os.File, error) {
	bad := func(format string, args ...any) error {
		return failure.Newf(failure.ActionInputInvalid, "input artifact: %s", fmt.Sprintf(format, args...))
	}
	dir := r.artifactDir()
	if st, err := os.Lstat(dir); err != nil {
		return nil, bad("%s cannot be read (%v): download the build run's artifact into it first (actions/download-artifact with run-id)", r.in.Artifact, err)
	} else if !st.IsDir() {
		return nil, bad("%s is not a directory (%s)", r.in.Artifact, st.Mode().Type())
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, bad("%s cannot be opened: %v", r.in.Artifact, err)
	}
	defer root.Close()
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		st, err := root.Lstat(p)
		if err != nil {
			return nil, bad("%s holds no %s (%v)", r.in.Artifact, p, err)
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return nil, bad("%s in %s is a link: an artifact is data and af follows no link in it", p, r.in.Artifact)
		}
		if i < len(parts)-1 && !st.IsDir() {
			return nil, bad("%s in %s is not a directory", p, r.in.Artifact)
		}
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, bad("%s in %s cannot be opened: %v", name, r.in.Artifact, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, bad("%s in %s: %v", name, r.in.Artifact, err)
	case !st.Mode().IsRegular():
		f.Close()
		return nil, bad("%s in %s is not a regular file (%s)", name, r.in.Artifact, st.Mode().Type())
	case st.Size() > limit:
		f.Close()
		return nil, bad("%s in %s is %d bytes; af reads at most %d of it", name, r.in.Artifact, st.Size(), limit)
	}
	return f, nil
}

// readArtifact reads and checks the description of the artifact the deploy job downloaded.
func (r *run) readArtifact() (Artifact, error) {
	var a Artifact
	bad := func(format string, args ...any) error {
		return failure.Newf(failure.ActionInputInvalid, "input artifact: %s", fmt.Sprintf(format, args...))
	}
	f, err := r.artifactFile(ArtifactMeta, MaxArtifactMeta)
	if err != nil {
		return a, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxArtifactMeta+1))
	if err != nil {
		return a, bad("%s: %v", ArtifactMeta, err)
	}
	if len(b) > MaxArtifactMeta {
		return a, bad("%s is larger than %d bytes", ArtifactMeta, MaxArtifactMeta)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, bad("%s: %v", ArtifactMeta, err)
	}
	if !shaForm.MatchString(a.HeadSHA) || a.PullRequest < 1 {
		return a, bad("%s names no pull request or no commit", ArtifactMeta)
	}
	if a.Repository == "" {
		return a, bad("%s names no repository: af deploys only a build that says which repository's pull request it is", ArtifactMeta)
	}
	for _, svc := range a.Images {
		if !serviceForm.MatchString(svc) {
			return a, bad("%s names an image %q that is no service name", ArtifactMeta, svc)
		}
	}
	return a, nil
}

// deployable checks the artifact against the event and against GitHub now: built by the run
// this event is about, for a pull request that is still open and whose head is still that
// commit. It returns the archives to deploy. A pull request closed or moved on deploys nothing
// (ForkNotApproved: the step is neutral; the run for the new head deploys that).
func (r *run) deployable(ctx context.Context) (map[string]string, error) {
	if r.ev.Name != "workflow_run" {
		return nil, failure.Newf(failure.ActionInputInvalid, "input artifact: a build's artifact is deployed by a workflow_run job; this run is for %s", r.ev.Name)
	}
	a, err := r.readArtifact()
	if err != nil {
		return nil, err
	}
	if r.ev.Run.Conclusion != "" && r.ev.Run.Conclusion != "success" {
		return nil, failure.Newf(failure.ForkNotApproved, "the build run ended %s: nothing to deploy", r.ev.Run.Conclusion)
	}
	if r.ev.Run.HeadRepository == "" {
		return nil, failure.Newf(failure.ActionInputInvalid, "input artifact: the workflow_run event names no head repository, so the build cannot be matched to a pull request's head: nothing is deployed")
	}
	if a.HeadSHA != r.ev.HeadSHA || (r.ev.PullRequest != 0 && r.ev.PullRequest != a.PullRequest) || !strings.EqualFold(a.Repository, r.repo) {
		return nil, failure.Newf(failure.ActionInputInvalid, "input artifact: it was built for %s #%d at %s, but the run it comes from is for %s at %s: download the artifact of this event's run (run-id: ${{ github.event.workflow_run.id }})",
			a.Repository, a.PullRequest, a.HeadSHA, r.repo, r.ev.HeadSHA)
	}
	pull, err := r.rep.PullRequest(ctx, a.PullRequest)
	if err != nil {
		return nil, err
	}
	r.ev.PullRequest = a.PullRequest
	switch {
	case !pull.Open:
		return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d is closed: nothing is deployed", a.PullRequest)
	case pull.HeadSHA != a.HeadSHA:
		return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d's head is now %s, not %s, the commit this artifact was built from: it deploys nothing (the run for the new head builds that)", a.PullRequest, pull.HeadSHA, a.HeadSHA)
	case !strings.EqualFold(pull.HeadRepository, r.ev.Run.HeadRepository):
		return nil, failure.Newf(failure.ActionInputInvalid, "input artifact: the build ran on %s, but pull request #%d's head is on %s", r.ev.Run.HeadRepository, a.PullRequest, pull.HeadRepository)
	}
	tars := map[string]string{}
	for _, svc := range a.Images {
		f, err := r.artifactFile("images/"+svc+".tar", MaxArtifactImage)
		if err != nil {
			return nil, err
		}
		f.Close()
		tars[svc] = filepath.Join(r.artifactDir(), "images", svc+".tar")
	}
	r.logf("deploying the build of pull request #%d at %s (run %d), checked against GitHub: open, head unchanged", a.PullRequest, a.HeadSHA, r.ev.Run.ID)
	return tars, nil
}

// fromArtifact says whether this run deploys a build run's artifact.
func (r *run) fromArtifact() bool { return r.in.Artifact != "" && r.in.Command == "up" }
