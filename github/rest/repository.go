// Package rest is af's client of one repository on GitHub's REST API, for the action, the App
// and the reaper alike: what they read there (pull requests, permissions, labels, files at a
// commit, maintainers' approvals and what each bound) and the one label the action takes off.
// Writing what is shown (the comment, check runs, deployments) is github/report's, over the
// same client; making the client (a token, an App installation) is github/api's and the App's.
package rest

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
)

// Repository is one repository on GitHub, through a client allowed to read it.
type Repository struct {
	Client *github.Client
	Owner  string
	Repo   string
}

// New returns repository OWNER/NAME through c.
func New(c *github.Client, repository string) (*Repository, error) {
	owner, repo, ok := strings.Cut(repository, "/")
	if !ok || owner == "" || repo == "" || strings.Contains(repo, "/") {
		return nil, fmt.Errorf("%q is not a repository (OWNER/NAME)", repository)
	}
	return &Repository{Client: c, Owner: owner, Repo: repo}, nil
}

// FullName is OWNER/NAME.
func (r *Repository) FullName() string { return r.Owner + "/" + r.Repo }

// Environment is the deployment environment of pull request n: af's deployments are there, and
// the images each approval bound are read from them.
func Environment(n int) string { return fmt.Sprintf("pr-%d", n) }

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// Pull is what af reads of a pull request before it deploys a build of it.
type Pull struct {
	Number  int
	Open    bool
	HeadSHA string
	// HeadRepository is where the head commit lives (a fork's full name), "" when it is gone.
	HeadRepository string
}

// PullRequest reads pull request n as it is now.
func (r *Repository) PullRequest(ctx context.Context, n int) (Pull, error) {
	p, _, err := r.Client.PullRequests.Get(ctx, r.Owner, r.Repo, n)
	if err != nil {
		return Pull{}, api.Classify(fmt.Sprintf("reading pull request #%d of %s/%s", n, r.Owner, r.Repo), err)
	}
	return Pull{Number: n, Open: p.GetState() == "open", HeadSHA: p.GetHead().GetSHA(),
		HeadRepository: p.GetHead().GetRepo().GetFullName()}, nil
}

// CanWrite says whether login may write to the repository (admin, maintain or write).
func (r *Repository) CanWrite(ctx context.Context, login string) (bool, error) {
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

// OpenPulls returns the numbers of the repository's open pull requests, 100 to a request.
func (r *Repository) OpenPulls(ctx context.Context) (map[int]bool, error) {
	open := map[int]bool{}
	opt := &github.PullRequestListOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	for {
		list, resp, err := r.Client.PullRequests.List(ctx, r.Owner, r.Repo, opt)
		if err != nil {
			return nil, api.Classify("listing the open pull requests of "+r.Owner+"/"+r.Repo, err)
		}
		for _, p := range list {
			open[p.GetNumber()] = true
		}
		if resp.NextPage == 0 {
			return open, nil
		}
		opt.Page = resp.NextPage
	}
}

// Merged says whether pull request n was merged (one request).
func (r *Repository) Merged(ctx context.Context, n int) (bool, error) {
	p, _, err := r.Client.PullRequests.Get(ctx, r.Owner, r.Repo, n)
	if err != nil {
		return false, api.Classify(fmt.Sprintf("reading pull request #%d of %s/%s", n, r.Owner, r.Repo), err)
	}
	return p.GetMerged(), nil
}

// HasLabel says whether pull request n carries label now (read at run time, not from the
// event: a label removed since still counts as removed).
func (r *Repository) HasLabel(ctx context.Context, n int, label string) (bool, error) {
	list, _, err := r.Client.Issues.ListLabelsByIssue(ctx, r.Owner, r.Repo, n, &github.ListOptions{PerPage: 100})
	if err != nil {
		return false, api.Classify(fmt.Sprintf("reading the labels of pull request #%d", n), err)
	}
	for _, l := range list {
		if strings.EqualFold(l.GetName(), label) {
			return true, nil
		}
	}
	return false, nil
}

// RemoveLabel takes label off pull request n; a label already gone is not an error.
func (r *Repository) RemoveLabel(ctx context.Context, n int, label string) error {
	resp, err := r.Client.Issues.RemoveLabelForIssue(ctx, r.Owner, r.Repo, n, label)
	if err != nil && (resp == nil || resp.StatusCode != 404) {
		return api.Classify(fmt.Sprintf("removing label %s from pull request #%d", label, n), err)
	}
	return nil
}

// File returns the content of path at ref, and false when it does not exist there.
func (r *Repository) File(ctx context.Context, path, ref string) ([]byte, bool, error) {
	fc, _, resp, err := r.Client.Repositories.GetContents(ctx, r.Owner, r.Repo, path, &github.RepositoryContentGetOptions{Ref: ref})
	if err != nil {
		if resp != nil && resp.StatusCode == 404 {
			return nil, false, nil
		}
		return nil, false, api.Classify(fmt.Sprintf("reading %s at %s", path, short(ref)), err)
	}
	if fc == nil {
		return nil, false, fmt.Errorf("%s at %s is a directory", path, short(ref))
	}
	s, err := fc.GetContent() // decodes base64
	return []byte(s), true, err
}
