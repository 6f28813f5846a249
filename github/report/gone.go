package report

import (
	"context"
	"errors"
)

// Reasons an environment is removed, as the comment and the deployment's status give them.
const (
	ReasonClosed  = "the pull request was closed"
	ReasonMerged  = "the pull request was merged"
	ReasonExpired = "its time to live ran out"
	ReasonCommand = "the workflow ran `command: down`"
)

// ClosedReason is the reason a closed pull request's environment is removed.
func ClosedReason(merged bool) string {
	if merged {
		return ReasonMerged
	}
	return ReasonClosed
}

// GoneParts says which parts of the teardown report are sent: the manifest's github block can
// turn the comment or the deployment off.
type GoneParts struct {
	Comment    bool
	Deployment bool
}

// GoneResult is what Gone did.
type GoneResult struct {
	// CommentURL is af's comment, "" when the pull request has none.
	CommentURL string
	// Rewritten says whether the comment was rewritten (false when it already said gone).
	Rewritten bool
	// Deactivated counts the deployments marked inactive.
	Deactivated int
}

// Gone reports on pull request f.PullRequest that its environment was removed, for f.Reason:
// af's comment rewritten to f's comment (once: a comment that already says gone stays as it
// is, and none is created), and every deployment of its environment marked inactive. Both
// parts are tried; the error joins each part's. The action's `down` and the App's teardown both
// send this report; it is idempotent, so a retried teardown posts nothing twice.
func (r *Reporter) Gone(ctx context.Context, f *Facts, parts GoneParts) (GoneResult, error) {
	var res GoneResult
	var errs []error
	if parts.Comment {
		url, rewritten, err := r.Retire(ctx, f.PullRequest, Comment(f))
		res.CommentURL, res.Rewritten = url, rewritten
		errs = append(errs, err)
	}
	if parts.Deployment {
		n, err := r.Deactivate(ctx, f.PullRequest, "preview removed: "+f.Reason)
		res.Deactivated = n
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}
