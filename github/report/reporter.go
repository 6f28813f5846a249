package report

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/rest"
)

// Reporter writes what af shows on one repository's pull requests: the sticky comment, the
// check runs and the deployments. What it reads there is its Repository's.
type Reporter struct {
	*rest.Repository
	// Bot is the login af writes as: github-actions[bot] with GITHUB_TOKEN, <slug>[bot] for
	// an App. Only its comments are ever edited.
	Bot string
	// Authors are other logins whose marked comment is af's too: the App rewrites the comment
	// the action wrote as github-actions[bot].
	Authors  []string
	Progress func(format string, args ...any)
}

func (r *Reporter) author(login string) bool {
	if strings.EqualFold(login, r.Bot) {
		return true
	}
	for _, a := range r.Authors {
		if strings.EqualFold(login, a) {
			return true
		}
	}
	return false
}

// NewReporter returns a reporter for repository OWNER/NAME.
func NewReporter(c *github.Client, repository, bot string) (*Reporter, error) {
	repo, err := rest.New(c, repository)
	if err != nil {
		return nil, err
	}
	return &Reporter{Repository: repo, Bot: bot}, nil
}

func (r *Reporter) say(format string, args ...any) {
	if r.Progress != nil {
		r.Progress(format, args...)
	}
}

// ours lists af's comments on pull request n (marker and author both), oldest first.
func (r *Reporter) ours(ctx context.Context, n int) ([]*github.IssueComment, error) {
	var out []*github.IssueComment
	opt := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		list, resp, err := r.Client.Issues.ListComments(ctx, r.Owner, r.Repo, n, opt)
		if err != nil {
			return nil, api.Classify(fmt.Sprintf("listing the comments of pull request #%d", n), err)
		}
		for _, c := range list {
			if strings.HasPrefix(c.GetBody(), Marker) && r.author(c.GetUser().GetLogin()) {
				out = append(out, c)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].GetID() < out[j].GetID() })
	return out, nil
}

// Comment writes body as af's one comment on pull request n: the existing one edited in place,
// else (with create) a new one. When two runs raced and both created one, the later ones are
// deleted, so exactly one stays. It returns the comment's URL, "" when there was none to edit.
func (r *Reporter) Comment(ctx context.Context, n int, body string, create bool) (string, error) {
	mine, err := r.ours(ctx, n)
	if err != nil {
		return "", err
	}
	if len(mine) == 0 && !create {
		return "", nil
	}
	if len(mine) == 0 {
		// Re-list right before creating: a run that raced us may have created it meanwhile.
		if mine, err = r.ours(ctx, n); err != nil {
			return "", err
		}
	}
	if len(mine) == 0 {
		c, _, err := r.Client.Issues.CreateComment(ctx, r.Owner, r.Repo, n, &github.IssueComment{Body: github.String(body)})
		if err != nil {
			return "", api.Classify(fmt.Sprintf("commenting on pull request #%d", n), err)
		}
		r.say("commented on pull request #%d: %s", n, c.GetHTMLURL())
		if mine, err = r.ours(ctx, n); err != nil {
			return c.GetHTMLURL(), err
		}
		if len(mine) <= 1 {
			return c.GetHTMLURL(), nil
		}
	}
	keep := mine[0]
	for _, extra := range mine[1:] {
		if resp, err := r.Client.Issues.DeleteComment(ctx, r.Owner, r.Repo, extra.GetID()); err != nil && (resp == nil || resp.StatusCode != 404) {
			return "", api.Classify(fmt.Sprintf("deleting a second af comment (%d) on pull request #%d", extra.GetID(), n), err)
		}
		r.say("deleted a second af comment on pull request #%d (a concurrent run made it)", n)
	}
	if keep.GetBody() == body {
		return keep.GetHTMLURL(), nil
	}
	c, _, err := r.Client.Issues.EditComment(ctx, r.Owner, r.Repo, keep.GetID(), &github.IssueComment{Body: github.String(body)})
	if err != nil {
		return "", api.Classify(fmt.Sprintf("editing af's comment on pull request #%d", n), err)
	}
	r.say("updated the comment on pull request #%d: %s", n, c.GetHTMLURL())
	return c.GetHTMLURL(), nil
}

// Retire rewrites af's comment on pull request n to body (a Gone comment), once: a comment that
// already says the environment is gone is left as it is, and none is created when there is no
// comment. It returns the comment's URL ("" when there is none) and whether it was rewritten.
func (r *Reporter) Retire(ctx context.Context, n int, body string) (string, bool, error) {
	mine, err := r.ours(ctx, n)
	if err != nil || len(mine) == 0 {
		return "", false, err
	}
	keep := mine[0]
	if IsGone(keep.GetBody()) {
		return keep.GetHTMLURL(), false, nil
	}
	c, _, err := r.Client.Issues.EditComment(ctx, r.Owner, r.Repo, keep.GetID(), &github.IssueComment{Body: github.String(body)})
	if err != nil {
		return "", false, api.Classify(fmt.Sprintf("editing af's comment on pull request #%d", n), err)
	}
	r.say("rewrote the comment on pull request #%d: %s", n, c.GetHTMLURL())
	return c.GetHTMLURL(), true, nil
}

// Annotation marks a line of a file (the manifest) in the check run.
type Annotation struct {
	Path    string
	Line    int
	Level   string // notice, warning, failure
	Title   string
	Message string
}

// StartCheck creates the check run, in progress, on the head commit.
func (r *Reporter) StartCheck(ctx context.Context, sha, detailsURL string) (int64, error) {
	opt := github.CreateCheckRunOptions{Name: CheckName, HeadSHA: sha, Status: github.String("in_progress"),
		StartedAt: &github.Timestamp{Time: time.Now()}, ExternalID: github.String("af"),
		Output: &github.CheckRunOutput{Title: github.String("Bringing the preview up"), Summary: github.String("af is building, probing and starting the environment.")}}
	if detailsURL != "" {
		opt.DetailsURL = github.String(detailsURL)
	}
	c, _, err := r.Client.Checks.CreateCheckRun(ctx, r.Owner, r.Repo, opt)
	if err != nil {
		return 0, api.Classify("creating the check run on "+short(sha), err)
	}
	return c.GetID(), nil
}

// FinishCheck completes check run id with conclusion and f's output; annotations go 50 per
// request, as GitHub takes them.
func (r *Reporter) FinishCheck(ctx context.Context, id int64, f *Facts, annotations []Annotation) error {
	title, summary, text := CheckOutput(f)
	batches := [][]Annotation{nil}
	for i := 0; i < len(annotations); i += 50 {
		if i == 0 {
			batches[0] = annotations[:min(50, len(annotations))]
			continue
		}
		batches = append(batches, annotations[i:min(i+50, len(annotations))])
	}
	for i, batch := range batches {
		out := &github.CheckRunOutput{Title: github.String(title), Summary: github.String(summary)}
		if text != "" {
			out.Text = github.String(text)
		}
		for _, a := range batch {
			out.Annotations = append(out.Annotations, &github.CheckRunAnnotation{Path: github.String(a.Path), StartLine: github.Int(a.Line), EndLine: github.Int(a.Line),
				AnnotationLevel: github.String(a.Level), Title: github.String(limit(a.Title, 255)), Message: github.String(limit(a.Message, 60000))})
		}
		opt := github.UpdateCheckRunOptions{Name: CheckName, Output: out}
		if i == len(batches)-1 {
			opt.Conclusion = github.String(Conclusion(f))
			opt.CompletedAt = &github.Timestamp{Time: time.Now()}
		}
		if _, _, err := r.Client.Checks.UpdateCheckRun(ctx, r.Owner, r.Repo, id, opt); err != nil {
			return api.Classify("completing the check run", err)
		}
	}
	return nil
}

// Environment is the deployment environment of pull request n.
func Environment(n int) string { return rest.Environment(n) }

// Deploy creates a deployment of sha to pull request n's environment, in progress. bound, when
// set, is recorded in its payload: what an approval let deploy (Bindings reads it back).
func (r *Reporter) Deploy(ctx context.Context, n int, sha, logURL string, bound *rest.Binding) (int64, error) {
	req := &github.DeploymentRequest{
		Ref: github.String(sha), Task: github.String("deploy"), Environment: github.String(Environment(n)),
		Description: github.String("af preview of pull request #" + fmt.Sprint(n)), AutoMerge: github.Bool(false),
		RequiredContexts: &[]string{}, TransientEnvironment: github.Bool(true), ProductionEnvironment: github.Bool(false)}
	if bound != nil {
		req.Payload = map[string]any{rest.PayloadKey: bound}
	}
	d, _, err := r.Client.Repositories.CreateDeployment(ctx, r.Owner, r.Repo, req)
	if err != nil {
		return 0, api.Classify("creating the deployment for "+Environment(n), err)
	}
	if err := r.DeploymentStatus(ctx, d.GetID(), "in_progress", "", logURL, "bringing the preview up"); err != nil {
		return d.GetID(), err
	}
	return d.GetID(), nil
}

// DeploymentStatus posts a status on deployment id.
func (r *Reporter) DeploymentStatus(ctx context.Context, id int64, state, envURL, logURL, description string) error {
	req := &github.DeploymentStatusRequest{State: github.String(state), Description: github.String(limit(description, 140))}
	if envURL != "" {
		req.EnvironmentURL = github.String(envURL)
	}
	if logURL != "" {
		req.LogURL = github.String(logURL)
	}
	if _, _, err := r.Client.Repositories.CreateDeploymentStatus(ctx, r.Owner, r.Repo, id, req); err != nil {
		return api.Classify(fmt.Sprintf("posting deployment status %s", state), err)
	}
	return nil
}

// Deactivate marks every deployment of pull request n's environment inactive that is not
// already, and returns how many it marked.
func (r *Reporter) Deactivate(ctx context.Context, n int, description string) (int, error) {
	list, _, err := r.Client.Repositories.ListDeployments(ctx, r.Owner, r.Repo, &github.DeploymentsListOptions{Environment: Environment(n), ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return 0, api.Classify("listing the deployments of "+Environment(n), err)
	}
	marked := 0
	for _, d := range list {
		last, _, err := r.Client.Repositories.ListDeploymentStatuses(ctx, r.Owner, r.Repo, d.GetID(), &github.ListOptions{PerPage: 1})
		if err != nil {
			return marked, api.Classify(fmt.Sprintf("reading the statuses of deployment %d", d.GetID()), err)
		}
		if len(last) > 0 && last[0].GetState() == "inactive" {
			continue // already: a retried teardown posts nothing twice
		}
		if err := r.DeploymentStatus(ctx, d.GetID(), "inactive", "", "", description); err != nil {
			return marked, err
		}
		marked++
	}
	return marked, nil
}
