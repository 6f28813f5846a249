package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
)

// approveCommand is a maintainer's approval of one commit: the comment's whole text, less
// white space around it, is "/af approve <sha>" with the full 40-digit commit id. Nothing else
// counts: not a prefix (a fork can push a commit whose id starts with given digits in minutes
// of computing), not the command inside other text, a quote, a code block, an HTML comment or
// a details block (each of those is other text around it).
var approveCommand = regexp.MustCompile(`^/af approve ([0-9a-fA-F]{40})$`)

// Approval is who approved a commit, and where: the comment's id binds what was deployed
// under it (deployment payloads, package action).
type Approval struct {
	Login     string
	URL       string
	CommentID int64
}

// CommitApproval finds a comment on pull request n that approves commit sha ("/af approve
// <sha>", the comment's whole text, never edited) by someone with write access to the
// repository (permission admin, maintain or write, read from GitHub now). ok is false when
// there is none: comments by others, naming another commit, edited since they were written
// or holding anything else approve nothing. Of several approvals the newest counts.
func (r *Repository) CommitApproval(ctx context.Context, n int, sha string) (Approval, bool, error) {
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	can := map[string]bool{}
	var found Approval
	ok := false
	for {
		list, resp, err := r.Client.Issues.ListComments(ctx, r.Owner, r.Repo, n, opt)
		if err != nil {
			return Approval{}, false, api.Classify(fmt.Sprintf("listing the comments of pull request #%d", n), err)
		}
		for _, c := range list {
			if !Approves(c, sha) {
				continue
			}
			login := c.GetUser().GetLogin()
			key := strings.ToLower(login)
			w, seen := can[key]
			if !seen {
				if w, err = r.CanWrite(ctx, login); err != nil {
					return Approval{}, false, err
				}
				can[key] = w
			}
			if w {
				// Listed oldest first: a later approval replaces an earlier one.
				found, ok = Approval{Login: login, URL: c.GetHTMLURL(), CommentID: c.GetID()}, true
			}
		}
		if resp.NextPage == 0 {
			return found, ok, nil
		}
		opt.Page = resp.NextPage
	}
}

// Approves says whether comment c approves commit sha: its whole text is "/af approve <sha>"
// with the full commit id, and it was not edited after it was written (an edit could turn any
// old comment of a maintainer's into an approval of a commit they never saw; GitHub moves
// updated_at on an edit).
func Approves(c *github.IssueComment, sha string) bool {
	m := approveCommand.FindStringSubmatch(strings.TrimSpace(c.GetBody()))
	if m == nil || !strings.EqualFold(m[1], sha) {
		return false
	}
	if created, updated := c.GetCreatedAt(), c.GetUpdatedAt(); !updated.IsZero() && !updated.Time.Equal(created.Time) {
		return false
	}
	return true
}

// Binding is what one approval let deploy: the approving comment and each service's image
// (its id, the digest of its configuration). It is recorded in the payload of the deployment
// af creates, so a later build of the same commit with other images is not deployed under the
// same approval.
type Binding struct {
	Approval int64             `json:"approval"`
	Images   map[string]string `json:"images"`
}

// PayloadKey is where a deployment's payload holds af's Binding.
const PayloadKey = "af_binding"

// Bindings reads the bindings recorded on pull request n's deployments of commit sha, newest
// first. Deployments without one (the repository's own, or made before) are passed over.
func (r *Repository) Bindings(ctx context.Context, n int, sha string) ([]Binding, error) {
	opt := &github.DeploymentsListOptions{SHA: sha, Environment: Environment(n), ListOptions: github.ListOptions{PerPage: 100}}
	var out []Binding
	for {
		list, resp, err := r.Client.Repositories.ListDeployments(ctx, r.Owner, r.Repo, opt)
		if err != nil {
			return nil, api.Classify("listing the deployments of "+Environment(n)+" at "+sha, err)
		}
		for _, d := range list {
			var p map[string]json.RawMessage
			if json.Unmarshal(d.Payload, &p) != nil || p[PayloadKey] == nil {
				continue
			}
			var b Binding
			if json.Unmarshal(p[PayloadKey], &b) == nil && b.Approval != 0 {
				out = append(out, b)
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opt.Page = resp.NextPage
	}
}
