// Package envtarget is what af up, af down and af status share: the flags that name an
// environment (--env, or --pr with --repo) and the runtime the manifest asks for, built with
// the options af's own environment gives (package settings).
package envtarget

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/preview"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
	"github.com/antifailure/af/version"
)

// Flags name the environment.
type Flags struct {
	Env  string
	PR   int
	Repo string
}

// Add registers the flags on cmd.
func (fl *Flags) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&fl.Env, "env", "", "the environment id (default: <repo>-pr-<n> with --pr, else the manifest's name)")
	cmd.Flags().IntVar(&fl.PR, "pr", 0, "the pull request number; the id is <repo name>-pr-<n>")
	cmd.Flags().StringVar(&fl.Repo, "repo", "", "the repository, OWNER/NAME (default: GITHUB_REPOSITORY)")
}

// Ref resolves the flags against the manifest into an environment reference.
func (fl *Flags) Ref(f *factory.Factory, m *manifest.Manifest) (afruntime.Ref, error) {
	repo := fl.Repo
	if repo == "" {
		repo = f.Getenv("GITHUB_REPOSITORY")
	}
	ref := afruntime.Ref{Manifest: m, Repository: repo}
	switch {
	case fl.Env != "" && fl.PR != 0:
		return ref, failure.Newf(failure.UsageInvalid, "--env and --pr name the environment twice: give one")
	case fl.PR != 0 && repo == "":
		return ref, failure.Newf(failure.UsageInvalid, "--pr needs the repository: --repo OWNER/NAME or GITHUB_REPOSITORY")
	}
	var err error
	ref.ID, err = preview.ID(fl.Env, repo, fl.PR, m.Name)
	if na := (*preview.NotAnID)(nil); errors.As(err, &na) {
		return ref, failure.New(failure.NameInvalid, "--env "+na.Error(), err)
	}
	return ref, err
}

// Resolve reads the manifest, names the environment from the flags and builds the runtime the
// manifest asks for: what af up, af down and af status each do first. A pull request's
// environment (--pr) is named as the cluster has it (preview.Adopt): the id the action gave
// it, owner-qualified or not.
func (fl *Flags) Resolve(ctx context.Context, f *factory.Factory) (afruntime.Runtime, afruntime.Ref, error) {
	m, err := f.ValidManifest()
	if err != nil {
		return nil, afruntime.Ref{}, err
	}
	ref, err := fl.Ref(f, m)
	if err != nil {
		return nil, ref, err
	}
	var rt afruntime.Runtime
	if f.Runtime == nil {
		rt, err = Runtime(f, m)
	} else {
		rt, err = f.Runtime(m)
	}
	if err != nil || fl.PR == 0 {
		return rt, ref, err
	}
	ref, said := preview.Adopt(ctx, rt.Lister(), ref, fl.PR)
	if said != "" {
		Progress(f).Printf("%s", said)
	}
	return rt, ref, nil
}

// Runtime returns the runtime the manifest asks for, with the options af's environment gives
// (package settings).
func Runtime(f *factory.Factory, m *manifest.Manifest) (afruntime.Runtime, error) {
	return settings.Runtime(f.Getenv, m.Runtime.Provider, f.Options.Context, Progress(f))
}

// EngineImage says which engine image af deploys and where that choice came from.
func EngineImage(f *factory.Factory) string {
	if img, from := version.EngineImageFrom(f.Getenv); img != "" {
		return img + ", from " + from
	}
	info := version.Get(f.Getenv)
	return info.EngineImage + ", this build's own (the cluster must have it: make engine-image builds it)"
}

// Progress writes the runtime's progress to the error stream, also with -o json (standard
// output stays the result alone), and not at all with -q. It is safe for concurrent use, as
// afruntime.Progress must be.
func Progress(f *factory.Factory) afruntime.Progress {
	return func(format string, args ...any) {
		if f.IO.Quiet() {
			return
		}
		f.IO.ErrLine(f.IO.Color(iostreams.Cyan, "af:") + " " + strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
	}
}
