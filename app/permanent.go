package app

// Failures that end: a teardown that can never succeed (the repository deleted or renamed
// away, the App uninstalled from it, the pull request gone) is dead-lettered instead of being
// retried without end, and the failures that will pass are told apart by their reason.

import (
	"errors"
	"net/http"

	"github.com/antifailure/af/github/appclient"
)

// PermanentError is a teardown failure no retry can mend; the pool dead-letters the teardown.
type PermanentError struct {
	Reason string // a short word for metrics and logs: gone, uninstalled
	Err    error
}

func (e *PermanentError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// stepError is a failed attempt with the side that failed: "cluster" or "github".
type stepError struct {
	side string
	err  error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// FailureReason is a failed attempt's reason for metrics and logs: a permanent failure's own,
// else the side that failed and, for GitHub, the kind of answer.
func FailureReason(err error) string {
	var pe *PermanentError
	if errors.As(err, &pe) {
		return pe.Reason
	}
	side := "cluster"
	var se *stepError
	if errors.As(err, &se) {
		side = se.side
	}
	if side != "github" {
		return side
	}
	switch s := appclient.Status(err); {
	case s == http.StatusUnauthorized:
		return "github-unauthorized"
	case s == http.StatusForbidden || s == http.StatusTooManyRequests:
		return "github-refused"
	case s >= 500:
		return "github-unavailable"
	}
	return "github"
}
