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
	// The base branch's manifest decides the fork policy and the egress a pull request gets
	// without approval, never the pull request's own. Without it (a new file, an unreadable
	// one) the defaults apply: fork_policy label, and no egress at all.
	base := manifest.Egress{}
	gh := manifest.Defaulted[manifest.GitHub]()
	if r.ev.BaseSHA != "" {
		b, ok, err := r.rep.File(ctx, r.in.Manifest, r.ev.BaseSHA)
		switch {
		case err != nil:
			r.gha.Warningf("the base branch's %s could not be read, so no egress rule of this pull request's is applied without approval: %s", r.in.Manifest, failure.Ensure(err).Error())
		case ok:
			if res := manifest.Parse(b); res.Valid() {
				base, gh = res.Manifest.Egress, res.Manifest.GitHub
			}
		}
	}
	label, policy := gh.Label, gh.ForkPolicy
	approved := false
	if r.ev.Fork {
		switch policy {
		case "never":
			return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork and github.fork_policy is never", r.ev.PullRequest)
		case "label":
			if r.ev.Name != "pull_request_target" {
				return nil, failure.Newf(failure.ForkNotApproved, "pull request #%d comes from a fork: fork_policy label runs it only under pull_request_target", r.ev.PullRequest)
			}
			if r.ev.Action == "synchronize" {
				// A new commit needs a new approval.
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
