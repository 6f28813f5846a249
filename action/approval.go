package action

import (
	"context"
	"strings"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

// approval decides what the pull request may run: ForkNotApproved when it may not run at all;
// otherwise the egress rules left out for want of approval (the manifest is changed to the
// base branch's egress).
func (r *run) approval(ctx context.Context) ([]string, error) {
	if r.ev.PullRequest == 0 || r.ev.Name == "workflow_dispatch" {
		return nil, nil
	}
	// The base branch's manifest decides the fork policy (r.man's github block is the base
	// branch's: package trust) and the egress a pull request gets without approval. Without it
	// (a new file, an unreadable one) the defaults apply: fork_policy label, and no egress.
	base := manifest.Egress{}
	if r.base != nil {
		base = r.base.Egress
	}
	label, policy := r.man.GitHub.Label, r.man.GitHub.ForkPolicy
	approved := false
	if r.ev.Fork {
		switch policy {
		case "never":
			return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and github.fork_policy is never", r.ev.PullRequest)
		case "label":
			if r.ev.Name == "workflow_run" {
				// The fork path (artifact.go): a maintainer approves the very commit.
				who, ok, err := r.approvedCommit(ctx)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and nobody with write access approved its head commit %s: a maintainer who has read the change comments `/af approve %s`", r.ev.PullRequest, r.ev.HeadSHA, r.ev.HeadSHA)
				}
				r.logf("commit %s of pull request #%d approved by %s (%s)", r.ev.HeadSHA, r.ev.PullRequest, who.Login, who.URL)
				approved = true
				break
			}
			if r.ev.Name != "pull_request_target" {
				return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork: fork_policy label runs it only under pull_request_target or, built by its own run, under workflow_run", r.ev.PullRequest)
			}
			if r.ev.Action == "synchronize" || r.ev.Action == "reopened" {
				// A new commit needs a new approval, and so does a pull request reopened (what
				// was approved before it closed may not be what it holds now).
				if err := r.rep.RemoveLabel(ctx, r.ev.PullRequest, label); err != nil {
					return nil, err
				}
				r.logf("new commits on a fork's pull request: label %s removed; a maintainer adds it again to approve them", label)
			}
			has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
			if err != nil {
				return nil, err
			}
			if !has {
				return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and does not carry the label %s", r.ev.PullRequest, label)
			}
			approved = true
		case "always":
			approved = true
		}
	}
	wide := Widening(base, r.man.Egress)
	if len(wide) == 0 {
		return nil, nil
	}
	if !approved {
		has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
		if err != nil {
			r.gha.Warningf("the labels of pull request #%d could not be read, so its egress widening counts as not approved: %s", r.ev.PullRequest, failure.Ensure(err).Error())
		}
		approved = has
	}
	if approved {
		r.logf("egress widened by the pull request, approved by the label %s: %s", label, strings.Join(wide, "; "))
		return nil, nil
	}
	m := *r.man
	m.Egress = base
	r.man = &m
	r.gha.Warningf("%s", failure.Newf(failure.EgressNotApproved, "the environment runs under the base branch's egress rules; left out: %s", strings.Join(wide, "; ")).Error())
	return wide, nil
}
