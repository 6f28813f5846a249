package action

// A pull request is untrusted input: its af.yaml is held to the default branch's (package trust)
// before anything reads it, and the secrets a database URL may come from are the ones the
// workflow hands over for that purpose.

import (
	"context"
	"strings"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/manifest/trust"
)

// SecretPrefix starts the name of every variable database.url_from may name under the action:
// the workflow sets it for that purpose (env: PREVIEW_DATABASE_URL: ${{ secrets.… }}). af's,
// GitHub's, the runner's and the inputs' variables never start with it, so none of them can be
// read into a service.
const SecretPrefix = "PREVIEW_"

// fromPullRequest says whether the run is for a pull request, whose manifest is held to the
// default branch's: every event that names one, a dispatch with pr-number included (it deploys
// that pull request's head under the same rules as its pull_request run).
func (r *run) fromPullRequest() bool {
	return r.ev.PullRequest > 0
}

// effective makes the manifest this run works under, once (trust.Effective): a pull request's
// af.yaml held to the operator's (r.base, readPolicy: the default branch's at its current head,
// never the pull request's base, which its author picks and may move after an approval), its
// egress the base's unless the widening is approved (egressApproved), and the registry input.
// Each value left out is a warning and a line of the comment.
func (r *run) effective(ctx context.Context) {
	s := trust.Sources{Manifest: r.res.Manifest, PullRequest: r.fromPullRequest(), Base: r.base, Registry: r.in.Registry}
	s.EgressApproved = r.egressApproved(ctx, s)
	eff := trust.Effective(s)
	r.man = eff.Manifest
	for _, i := range eff.Ignored {
		r.gha.Warningf("%s: %s", r.in.Manifest, i)
		r.ignored = append(r.ignored, i.String())
	}
	if len(eff.EgressWidened) > 0 && s.EgressApproved {
		r.logf("egress widened by the pull request, approved: %s", strings.Join(eff.EgressWidened, "; "))
	}
	if r.leftOut = eff.EgressLeftOut; len(r.leftOut) > 0 {
		r.gha.Warningf("%s", failure.Newf(failure.EgressNotApproved, "the environment runs under the default branch's egress rules; left out: %s", strings.Join(r.leftOut, "; ")).Error())
	}
}

// readPolicy reads the operator's manifest from the default branch: nil when it has none,
// when it cannot be read or is invalid, each said in the log (the defaults then rule: no
// domain, no database, no egress, forks only once approved).
func (r *run) readPolicy(ctx context.Context) *manifest.Manifest {
	branch := r.ev.DefaultBranch
	if branch == "" {
		r.gha.Warningf("the event names no default branch, so no %s is read for the operator's settings and their defaults rule this pull request (no domain, no database, no egress, forks only once approved)", r.in.Manifest)
		return nil
	}
	b, ok, err := r.rep.File(ctx, r.in.Manifest, branch)
	switch {
	case err != nil:
		r.gha.Warningf("the default branch's (%s) %s could not be read, so its defaults rule this pull request (no domain, no database, no egress): %s", branch, r.in.Manifest, failure.Ensure(err).Error())
		return nil
	case !ok:
		r.logf("the default branch (%s) has no %s: its defaults rule this pull request (no domain, no database, no egress)", branch, r.in.Manifest)
		return nil
	}
	res := manifest.Parse(b)
	if !res.Valid() {
		r.gha.Warningf("the default branch's (%s) %s is not valid, so its defaults rule this pull request: %s", branch, r.in.Manifest, res.Err(r.in.Manifest))
		return nil
	}
	r.logf("the operator's settings: %s on the default branch %s", r.in.Manifest, branch)
	return res.Manifest
}

// checkURLFrom refuses a database.url_from that names a variable not handed over for it.
func (r *run) checkURLFrom() error {
	if r.man.Database == nil || r.man.Database.URLFrom == "" || strings.HasPrefix(r.man.Database.URLFrom, SecretPrefix) {
		return nil
	}
	return failure.Newf(failure.ManifestInvalid, "database.url_from names %s: under the action it may name only a variable whose name starts with %s, which the workflow sets for it (env: %sDATABASE_URL: ${{ secrets.DATABASE_URL }}); af's, GitHub's, the runner's and the inputs' variables are never read into a service",
		r.man.Database.URLFrom, SecretPrefix, SecretPrefix)
}

// secretEnv is the environment a database URL may be read from: only SecretPrefix variables.
func (r *run) secretEnv(name string) string {
	if !strings.HasPrefix(name, SecretPrefix) {
		return ""
	}
	return r.d.Getenv(name)
}
