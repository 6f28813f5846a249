package preview

import (
	"context"
	"fmt"

	"github.com/antifailure/af/envid"
	"github.com/antifailure/af/images"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
)

// NotAnID is an environment name given as it is (--env, the environment input) that is not
// an environment id (a DNS label): Would is the id it would make. The caller says which of its
// inputs it was.
type NotAnID struct{ Given, Would string }

func (e *NotAnID) Error() string {
	return fmt.Sprintf("%q is not an environment id (a DNS label); %q would be", e.Given, e.Would)
}

// ID names an environment: env when given (it must be an id already, else *NotAnID), else
// pull request pr's of repository (<repo>-pr-<n>, envid), else, with no pull request, name's
// (the manifest's name) made an id. The id a pull request's environment has on a cluster may
// differ (the owner's): Adopt finds it.
func ID(env, repository string, pr int, name string) (string, error) {
	switch {
	case env != "":
		id, err := envid.ForName(env)
		if err == nil && id != env {
			return "", &NotAnID{Given: env, Would: id}
		}
		return id, err
	case pr != 0 || name == "":
		return envid.ForPullRequest(repository, pr)
	default:
		return envid.ForName(name)
	}
}

// NeedsBuild says whether a service of m is built from source and has neither an image in
// imgs nor an archive in tars.
func NeedsBuild(m *manifest.Manifest, imgs, tars map[string]string) bool {
	for name, s := range m.Services {
		if s.Build != nil && imgs[name] == "" && tars[name] == "" {
			return true
		}
	}
	return false
}

// Build builds what af up needs built before it brings an environment up: each service of m
// built from source that has neither an image in imgs nor an archive in tars, with the
// container daemon af's environment names (settings.Docker), from base (the manifest's
// directory); each archive is added to tars. With nothing to build it asks for no daemon.
func Build(ctx context.Context, getenv func(string) string, progress afruntime.Progress, m *manifest.Manifest, base string, imgs, tars map[string]string) error {
	if !NeedsBuild(m, imgs, tars) {
		return nil
	}
	d, err := settings.Docker(getenv, progress)
	if err != nil {
		return err
	}
	return images.BuildServices(ctx, d, m, base, imgs, tars)
}
