package action

// The environment: its id (preview.ID: the environment input, else the pull request's), the
// runtime the manifest asks for, and the id as the cluster has it (preview.Adopt).

import (
	"context"
	"errors"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/preview"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
)

// ref names the environment (preview.ID): the environment input, else the pull request's.
func (r *run) ref() (afruntime.Ref, error) {
	ref := afruntime.Ref{Manifest: r.man, Repository: r.repo}
	var err error
	ref.ID, err = preview.ID(r.in.Environment, r.repo, r.ev.PullRequest, "")
	if na := (*preview.NotAnID)(nil); errors.As(err, &na) {
		return ref, failure.New(failure.ActionInputInvalid, "input environment: "+na.Error(), err)
	}
	return ref, err
}

func (r *run) runtime() (afruntime.Runtime, error) {
	if r.d.Runtime != nil {
		return r.d.Runtime(r.man, r.getenv, r.in.Context)
	}
	return settings.Runtime(r.getenv, r.man.Runtime.Provider, r.in.Context, r.logf)
}

// target names the environment and makes its runtime: what up, down and status do first. A
// runtime that cannot be made is the error beside the environment named (up reports it).
func (r *run) target(ctx context.Context) (afruntime.Ref, afruntime.Runtime, error) {
	ref, err := r.ref()
	if err != nil {
		return ref, nil, err
	}
	rt, err := r.runtime()
	if err != nil {
		return ref, nil, err
	}
	return r.adopt(ctx, rt, ref), rt, nil
}

// adopt names a pull request's environment as the cluster has it (preview.Adopt): the id af
// gave it before, which carries the owner when another repository of the same name had the
// short id first. An environment input is the environment's name as given.
func (r *run) adopt(ctx context.Context, rt afruntime.Runtime, ref afruntime.Ref) afruntime.Ref {
	if r.in.Environment != "" {
		return ref
	}
	ref, said := preview.Adopt(ctx, rt.Lister(), ref, r.ev.PullRequest)
	if said != "" {
		r.logf("%s", said)
	}
	return ref
}
