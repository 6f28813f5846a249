package action

import (
	"context"
	"strings"

	"github.com/antifailure/af/failure"
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
// Pull requests from the repository's own branches, and dispatches, are admitted.
func (r *run) admit(ctx context.Context) error {
	if r.ev.PullRequest == 0 || r.ev.Name == "workflow_dispatch" || !r.ev.Fork {
		return nil
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

// egress decides the egress the pull request runs with: its own when it widens nothing or was
// approved (admit, or the label), else the default branch's, with what was left out returned.
func (r *run) egress(ctx context.Context) []string {
	if r.ev.PullRequest == 0 || r.ev.Name == "workflow_dispatch" {
		return nil
	}
	// Without the default branch's manifest (a new file, an unreadable one) no egress is given.
	base := manifest.Egress{}
	if r.base != nil {
		base = r.base.Egress
	}
	label := r.policy().Label
	wide := Widening(base, r.man.Egress)
	if len(wide) == 0 {
		return nil
	}
	approved := r.approved
	if !approved {
		has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
		if err != nil {
			r.gha.Warningf("the labels of pull request #%d could not be read, so its egress widening counts as not approved: %s", r.ev.PullRequest, failure.Ensure(err).Error())
		}
		approved = has
	}
	if approved {
		r.logf("egress widened by the pull request, approved: %s", strings.Join(wide, "; "))
		return nil
	}
	m := *r.man
	m.Egress = base
	r.man = &m
	r.gha.Warningf("%s", failure.Newf(failure.EgressNotApproved, "the environment runs under the default branch's egress rules; left out: %s", strings.Join(wide, "; ")).Error())
	return wide
}
