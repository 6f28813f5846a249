// Package preview is the one path from a pull request to its environment, shared by the CLI
// (af up, af down, af status and every command that reads an environment) and the GitHub
// Action: the environment's id (ID), the id a pull request's environment has on the cluster
// (Adopt), building what has no image before an up (Build), and bringing it up under the id
// that is this repository's (Up). What of a pull request's af.yaml is taken is manifest/trust's
// (Effective).
//
// A pull request's environment is <repo>-pr-<n>, or <owner>-<repo>-pr-<n> when another
// repository of the same name had the short id on the cluster first (envid). Whoever names the
// environment later (a status, a down, the next push) finds the id it was given by its
// repository and number (Adopt), and whoever brings it up first falls back to the long id when
// the short one is another repository's (Up).
package preview

import (
	"context"
	"errors"
	"fmt"

	"github.com/antifailure/af/envid"
	afruntime "github.com/antifailure/af/runtime"
)

// Adopt returns ref named as the cluster has repository's pull request pr: the id af gave its
// environment before, found by its repository and number, when exactly one environment has
// them. ref is returned as it is when there is none, when l is nil (a runtime that cannot
// list) or when listing fails (the caller then goes on with the id it computed). said is a
// line for the progress when the id differs, else "".
func Adopt(ctx context.Context, l afruntime.Lister, ref afruntime.Ref, pr int) (adopted afruntime.Ref, said string) {
	if l == nil || pr == 0 || ref.Repository == "" {
		return ref, ""
	}
	envs, err := l.Environments(ctx, afruntime.Filter{Repository: ref.Repository, PullRequest: pr})
	if err != nil || len(envs) != 1 {
		return ref, ""
	}
	if envs[0].ID != ref.ID {
		said = fmt.Sprintf("pull request #%d's environment is %s (namespace %s)", pr, envs[0].ID, envs[0].Namespace)
	}
	ref.ID = envs[0].ID
	return ref, said
}

// Up brings spec up with rt. For a pull request's environment under its short id, when the
// namespace of that id holds another repository's environment, it brings it up again under
// the id that carries the owner (progress says so). It returns the spec as brought up: its ID
// is the environment's.
func Up(ctx context.Context, rt afruntime.Runtime, spec afruntime.Spec, progress afruntime.Progress) (*afruntime.Result, afruntime.Spec, error) {
	res, err := rt.Up(ctx, spec)
	if !errors.Is(err, afruntime.ErrOtherRepository) || spec.PullRequest == 0 || spec.Repository == "" {
		return res, spec, err
	}
	short, serr := envid.ForPullRequest(spec.Repository, spec.PullRequest)
	if serr != nil || spec.ID != short {
		return res, spec, err // named otherwise (an --env, an adopted id): not this fallback's
	}
	long, lerr := envid.ForPullRequestOfOwner(spec.Repository, spec.PullRequest)
	if lerr != nil {
		return res, spec, lerr
	}
	if progress != nil {
		progress("another repository named like %s has %s on this cluster: this pull request's environment is %s", spec.Repository, short, long)
	}
	spec.ID = long
	res, err = rt.Up(ctx, spec)
	return res, spec, err
}
