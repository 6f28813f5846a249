package report

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
)

// Pull is what af reads of a pull request before it deploys a build of it.
type Pull struct {
	Number  int
	Open    bool
	HeadSHA string
	BaseSHA string
	// HeadRepository is where the head commit lives (a fork's full name), "" when it is gone.
	HeadRepository string
}

// PullRequest reads pull request n as it is now.
func (r *Reporter) PullRequest(ctx context.Context, n int) (Pull, error) {
	p, _, err := r.Client.PullRequests.Get(ctx, r.Owner, r.Repo, n)
	if err != nil {
		return Pull{}, api.Classify(fmt.Sprintf("reading pull request #%d of %s/%s", n, r.Owner, r.Repo), err)
	}
	return Pull{Number: n, Open: p.GetState() == "open", HeadSHA: p.GetHead().GetSHA(), BaseSHA: p.GetBase().GetSHA(),
		HeadRepository: p.GetHead().GetRepo().GetFullName()}, nil
}

// approveCommand is a maintainer's approval of one commit: "/af approve <sha>" on a line of its
// own (the full SHA or at least its first 7 hex digits).
var approveCommand = regexp.MustCompile(`(?m)^\s*/af approve ([0-9a-fA-F]{7,40})\s*$`)

// Approval is who approved a commit, and where.
type Approval struct {
	Login string
	URL   string
}

// CommitApproval finds a comment on pull request n that approves commit sha ("/af approve
// <sha>") by someone with write access to the repository (permission admin, maintain or
// write, read from GitHub now). ok is false when there is none: comments by others, or naming
// another commit, approve nothing.
func (r *Reporter) CommitApproval(ctx context.Context, n int, sha string) (Approval, bool, error) {
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	checked := map[string]bool{}
	for {
		list, resp, err := r.Client.Issues.ListComments(ctx, r.Owner, r.Repo, n, opt)
		if err != nil {
			return Approval{}, false, api.Classify(fmt.Sprintf("listing the comments of pull request #%d", n), err)
		}
		for _, c := range list {
			if !approves(c.GetBody(), sha) {
				continue
			}
			login := c.GetUser().GetLogin()
			key := strings.ToLower(login)
			if done, seen := checked[key]; seen {
				if done {
					return Approval{Login: login, URL: c.GetHTMLURL()}, true, nil
				}
				continue
			}
			can, err := r.CanWrite(ctx, login)
			if err != nil {
				return Approval{}, false, err
			}
			checked[key] = can
			if can {
				return Approval{Login: login, URL: c.GetHTMLURL()}, true, nil
			}
		}
		if resp.NextPage == 0 {
			return Approval{}, false, nil
		}
		opt.Page = resp.NextPage
	}
}

// approves says whether body holds "/af approve <prefix>" for a prefix of sha.
func approves(body, sha string) bool {
	for _, m := range approveCommand.FindAllStringSubmatch(body, -1) {
		if strings.HasPrefix(strings.ToLower(sha), strings.ToLower(m[1])) {
			return true
		}
	}
	return false
}

// CanWrite says whether login may write to the repository (admin, maintain or write).
func (r *Reporter) CanWrite(ctx context.Context, login string) (bool, error) {
	p, _, err := r.Client.Repositories.GetPermissionLevel(ctx, r.Owner, r.Repo, login)
	if err != nil {
		return false, api.Classify(fmt.Sprintf("reading %s's permission on %s/%s", login, r.Owner, r.Repo), err)
	}
	switch p.GetPermission() {
	case "admin", "maintain", "write": // GitHub folds maintain into write here
		return true, nil
	}
	return false, nil
}
