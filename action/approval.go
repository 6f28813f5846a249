package action

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/rest"
	"github.com/antifailure/af/manifest"
)

// policy is the operator's github block: the default branch's, or the defaults without one.
func (r *run) policy() manifest.GitHub {
	if r.base != nil {
		return r.base.GitHub
	}
	return manifest.Defaulted[manifest.GitHub]()
}

// admit decides from the operator's policy alone (r.base, read before any file of the pull
// request) whether a fork's pull request may run at all: ForkNotApproved when it may not.
// Pull requests from the repository's own branches are admitted.
func (r *run) admit(ctx context.Context) error {
	if r.ev.PullRequest == 0 || !r.ev.Fork {
		return nil
	}
	if r.ev.Name == "workflow_dispatch" {
		// A fork's code is built only by its own unprivileged run, and deployed only by the
		// workflow_run that checks its approval: a dispatch has neither.
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork: it is deployed only from its own build run's artifact once a maintainer approved its head commit (re-run its preview-deploy run), never by a dispatch", r.ev.PullRequest)
	}
	gh := r.policy()
	switch gh.ForkPolicy {
	case "never":
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and github.fork_policy is never", r.ev.PullRequest)
	case "always":
		r.approved = true
		return nil
	}
	if r.ev.Name == "workflow_run" {
		// The fork path (artifact.go): a maintainer approves the very commit.
		who, ok, err := r.approvedCommit(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and nobody with write access approved its head commit %s: a maintainer who has read the change comments `/af approve %s` (the comment's whole text, the full commit id) and re-runs this deploy run", r.ev.PullRequest, r.ev.HeadSHA, r.ev.HeadSHA)
		}
		r.logf("commit %s of pull request #%d approved by %s (%s)", r.ev.HeadSHA, r.ev.PullRequest, who.Login, who.URL)
		r.approval = who
		r.approved = true
		return nil
	}
	if r.ev.Name != "pull_request_target" {
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork: fork_policy label runs it only under pull_request_target or, built by its own run, under workflow_run", r.ev.PullRequest)
	}
	if r.ev.Action == "synchronize" || r.ev.Action == "reopened" {
		// A new commit needs a new approval, and so does a pull request reopened (what was
		// approved before it closed may not be what it holds now).
		if err := r.rep.RemoveLabel(ctx, r.ev.PullRequest, gh.Label); err != nil {
			return err
		}
		r.logf("new commits on a fork's pull request: label %s removed; a maintainer adds it again to approve them", gh.Label)
	}
	has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, gh.Label)
	if err != nil {
		return err
	}
	if !has {
		return failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and does not carry the label %s", r.ev.PullRequest, gh.Label)
	}
	r.approved = true
	return nil
}

// errRebuilt is the cause of a refusal of a build the approval does not cover, where the
// approved build may still be running: the check run says so, the comment is left as it is.
var errRebuilt = errors.New("another build of the approved commit")

// bind ties an approval to the images it deploys (the fork path). The first deployment under
// an approval records its images; a later build of the same commit whose images differ is not
// deployed under that approval (ForkNotApproved): a maintainer approves again.
func (r *run) bind(ctx context.Context) error {
	if r.approval.CommentID == 0 {
		return nil // fork_policy always: nothing was approved, nothing binds
	}
	ids, err := imageIDs(r.tars)
	if err != nil {
		return err
	}
	b := &rest.Binding{Approval: r.approval.CommentID, Images: ids}
	prior, err := r.rep.Bindings(ctx, r.ev.PullRequest, r.ev.HeadSHA)
	if err != nil {
		return err
	}
	for _, p := range prior {
		if p.Approval == b.Approval && !maps.Equal(p.Images, b.Images) {
			return failure.New(failure.ForkNotApproved, fmt.Sprintf("commit %s was deployed under the approval %s with other images (%s); this build's differ (%s), so that approval does not cover it and this build was not deployed (the preview keeps running the approved one): a maintainer who has read the change approves again (a new comment `/af approve %s`) and re-runs this deploy run",
				r.ev.HeadSHA, r.approval.URL, imageList(p.Images), imageList(b.Images), r.ev.HeadSHA), errRebuilt)
		}
	}
	if !enabled(r.policy().Deployment) {
		r.gha.Warningf("github.deployment is off, so the images this approval deploys are not recorded: a later build of commit %s would deploy under the same approval", r.ev.HeadSHA)
	}
	r.binding = b
	return nil
}

// imageIDs reads each archive's image id (the digest of its configuration, which names every
// layer's content).
func imageIDs(tars map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for svc, path := range tars {
		img, err := tarball.ImageFromPath(path, nil)
		if err == nil {
			var h v1.Hash
			if h, err = img.ConfigName(); err == nil {
				out[svc] = h.String()
				continue
			}
		}
		return nil, failure.Newf(failure.ActionInputInvalid, "input artifact: %s's image archive is not an image: %v", svc, err)
	}
	return out, nil
}

func imageList(m map[string]string) string {
	var parts []string
	for _, svc := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, svc+" "+m[svc])
	}
	return strings.Join(parts, ", ")
}

// readPolicy reads the operator's manifest from the default branch: nil when it has none,
// when it cannot be read or is invalid, each said in the log (the defaults then rule: no
// domain, no database, no egress, forks only once approved).
func (r *run) readPolicy(ctx context.Context) *manifest.Manifest {
	branch := r.ev.DefaultBranch
	if branch == "" {
		r.gha.Warningf("the event names no default branch, so no %s is read for the operator's settings and their defaults rule this pull request (no domain, no database, no egress, forks only once approved)", r.in.Manifest)
		return nil
	}
	b, ok, err := r.rep.File(ctx, r.in.Manifest, branch)
	switch {
	case err != nil:
		r.gha.Warningf("the default branch's (%s) %s could not be read, so its defaults rule this pull request (no domain, no database, no egress): %s", branch, r.in.Manifest, failure.Ensure(err).Error())
		return nil
	case !ok:
		r.logf("the default branch (%s) has no %s: its defaults rule this pull request (no domain, no database, no egress)", branch, r.in.Manifest)
		return nil
	}
	res := manifest.Parse(b)
	if !res.Valid() {
		r.gha.Warningf("the default branch's (%s) %s is not valid, so its defaults rule this pull request: %s", branch, r.in.Manifest, res.Err(r.in.Manifest))
		return nil
	}
	r.logf("the operator's settings: %s on the default branch %s", r.in.Manifest, branch)
	return res.Manifest
}

// approvedCommit says whether a maintainer approved the head commit of a fork's pull request
// ("/af approve <sha>" by someone with write access), and by whom.
func (r *run) approvedCommit(ctx context.Context) (rest.Approval, bool, error) {
	return r.rep.CommitApproval(ctx, r.ev.PullRequest, r.ev.HeadSHA)
}
