// Package app is the af GitHub App: the webhook endpoint that turns a closed pull request into
// a Teardown, the intake, pool and journal that carry it out once and durably, and the reaper
// for what webhooks miss. Where each part is:
//
//   - app.go: Teardown, the unit of work every part passes on.
//   - webhook.go: POST /webhook (signature, body, the pull_request event, github/event).
//   - intake.go, queue.go, journal.go, limit.go: the intake records a teardown (journal) before
//     the 202, the pool runs it with bounded workers and backoff, the limiter keeps the
//     repository's GitHub writes one at a time.
//   - teardown.go, permanent.go: one teardown (the environments found by their labels and
//     removed through the runtime, then the pull request's comment and deployment), and the
//     failures no retry mends.
//   - reaper.go: the sweep (closed pull requests, expired environments); containment.go: each
//     environment's watch read, and the pull request told when its containment changes.
//   - server.go, manage.go, metrics.go: the server (af app serve), health and readiness, metrics.
//
// GitHub is reached through github/appclient; the cluster through the runtime (ClusterOf); the
// journal and the leadership through app/clusterstore.
package app

import "time"

// Teardown is one environment to remove, asked for by a delivery or by the reaper.
type Teardown struct {
	Delivery       string
	Repository     string // OWNER/NAME
	PullRequest    int
	HeadSHA        string
	Merged         bool
	InstallationID int64
	// Namespace, when set, limits the teardown to that one environment (the reaper's, for a
	// manual environment, or one of several a pull request has).
	Namespace string
	// Reason says why: report.ReasonClosed, report.ReasonMerged or report.ReasonExpired.
	Reason string
	// Recorded is when the teardown was first asked for; a record older than the pool's
	// MaxAge is dead-lettered.
	Recorded time.Time `json:",omitzero"`
	// Dead, when set, is why the teardown ended without succeeding (dead-lettered at DeadAt):
	// its record stays for the operator until MaxAge has passed again, and it never runs again.
	Dead   string    `json:",omitempty"`
	DeadAt time.Time `json:",omitzero"`
}
