package report

import (
	"context"
	"time"

	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
)

// ContainmentCheckName is the check run the App writes on a pull request when its
// environment's watch sees containment break after the start, and again when it holds again.
const ContainmentCheckName = "af containment"

// ContainmentCheck writes a completed check run named ContainmentCheckName on sha: conclusion
// failure when contained is false, success when it is true, with title and summary as its
// output.
func (r *Reporter) ContainmentCheck(ctx context.Context, sha string, contained bool, title, summary string) (int64, error) {
	conclusion := "failure"
	if contained {
		conclusion = "success"
	}
	now := &github.Timestamp{Time: time.Now()}
	opt := github.CreateCheckRunOptions{Name: ContainmentCheckName, HeadSHA: sha, Status: github.String("completed"),
		Conclusion: github.String(conclusion), StartedAt: now, CompletedAt: now, ExternalID: github.String("af-watch"),
		Output: &github.CheckRunOutput{Title: github.String(limit(title, 255)), Summary: github.String(limit(summary, 60000))}}
	c, _, err := r.Client.Checks.CreateCheckRun(ctx, r.Owner, r.Repo, opt)
	if err != nil {
		return 0, api.Classify("writing the containment check run on "+short(sha), err)
	}
	return c.GetID(), nil
}
