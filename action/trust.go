package action

// A pull request is untrusted input: its af.yaml is held to the default branch's (package trust)
// before anything reads it, and the secrets a database URL may come from are the ones the
// workflow hands over for that purpose.

import (
	"context"
	"fmt"
	"path/filepath"
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

// manifest makes the manifest this run works under: the af.yaml loaded (the workspace's, or the
// artifact's), then held to the operator's (effective); an up also refuses a database.url_from
// the action does not hand over (checkURLFrom).
func (r *run) manifest(ctx context.Context) error {
	if err := r.loadManifest(); err != nil {
		return err
	}
	r.effective(ctx)
	if r.in.Command == "up" {
		return r.checkURLFrom()
	}
	return nil
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
	if r.in.Command != "up" {
		return // down and status run nothing: what egress would have been is not theirs to say
	}
	if len(eff.EgressWidened) > 0 && s.EgressApproved {
		r.logf("egress widened by the pull request, approved: %s", strings.Join(eff.EgressWidened, "; "))
	}
	if r.leftOut = eff.EgressLeftOut; len(r.leftOut) > 0 {
		r.gha.Warningf("%s", failure.Newf(failure.EgressNotApproved, "the environment runs under the default branch's egress rules; left out: %s", strings.Join(r.leftOut, "; ")).Error())
	}
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

// loadManifest reads the run's af.yaml: the workspace's, or the artifact's when it deploys one
// (as data: no link followed, at most manifest.MaxSize).
func (r *run) loadManifest() error {
	var res *manifest.Result
	var err error
	if r.fromArtifact() {
		f, ferr := r.artifactFile("af.yaml", manifest.MaxSize)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		res, err = manifest.Load("-", f)
	} else {
		res, err = manifest.Load(filepath.Join(r.workspace(), r.in.Manifest), nil)
	}
	if err != nil {
		return err
	}
	r.res = res // the manifest as given; effective makes what the run works under
	for _, w := range res.Warnings {
		r.gha.WithFieldsMap(map[string]string{"file": r.in.Manifest, "line": fmt.Sprint(max(w.Line, 1))}).Warningf("%s", w)
	}
	if err := res.Err(r.in.Manifest); err != nil {
		for _, p := range res.Problems {
			r.gha.WithFieldsMap(map[string]string{"file": r.in.Manifest, "line": fmt.Sprint(max(p.Line, 1))}).Errorf("%s", p)
		}
		return err
	}
	return nil
}

// egressApproved says whether a maintainer approved what the pull request's egress opens
// beyond the default branch's: the fork approval or the operator's policy admitted it already
// (r.approved), else the approval label, read from GitHub now (not from the event: a label
// removed since counts as removed). Only an up of a pull request that widens egress asks.
func (r *run) egressApproved(ctx context.Context, s trust.Sources) bool {
	if r.in.Command != "up" || !s.PullRequest || r.approved {
		return r.approved
	}
	if len(trust.Effective(s).EgressWidened) == 0 {
		return false // nothing widened: nothing to approve
	}
	label := r.policy().Label
	has, err := r.rep.HasLabel(ctx, r.ev.PullRequest, label)
	if err != nil {
		r.gha.Warningf("the labels of pull request #%d could not be read, so its egress widening counts as not approved: %s", r.ev.PullRequest, failure.Ensure(err).Error())
	}
	return has
}
