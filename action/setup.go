package action

// The run's setup: secrets masked, the client to GitHub, the manifest loaded, the kubeconfig
// input in a private file, the environment named and its runtime made.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/report"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/preview"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
)

// mask hides the secrets in the log before anything else can print them.
func (r *run) mask() {
	for _, name := range []string{"token", "registry-password", "pull-password"} {
		if v := r.gha.GetInput(name); v != "" {
			r.gha.AddMask(v)
		}
	}
	for _, s := range secretsOf(r.gha.GetInput("kubeconfig")) {
		r.gha.AddMask(s)
	}
}

// connect makes the client to GitHub and the pull request's reporter.
func (r *run) connect() error {
	c, stats, err := api.New(api.Options{APIURL: r.d.Getenv("GITHUB_API_URL"), Token: r.in.Token, Base: r.d.HTTP,
		Sleep: r.d.Sleep, Now: r.d.Now, Progress: r.logf, MaxWait: rateWait(r.d.Getenv)})
	if err != nil {
		return err
	}
	r.stats = stats
	if r.rep, err = report.NewReporter(c, r.repo, r.d.Bot); err != nil {
		return failure.Newf(failure.EventUnsupported, "GITHUB_REPOSITORY: %v", err)
	}
	r.rep.Progress = r.logf
	return nil
}

func rateWait(getenv func(string) string) time.Duration {
	if d, err := time.ParseDuration(getenv("AF_GITHUB_RATE_WAIT")); err == nil && d > 0 {
		return d
	}
	return api.DefaultMaxWait
}

func (r *run) workspace() string {
	if w := r.d.Getenv("GITHUB_WORKSPACE"); w != "" {
		return w
	}
	return "."
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

// writeKubeconfig puts the kubeconfig input in a private temporary file for the runtime.
func (r *run) writeKubeconfig() error {
	f, err := os.CreateTemp(r.tempDir(), "af-kubeconfig-*")
	if err != nil {
		return failure.New(failure.Internal, "writing the kubeconfig to a temporary file", err)
	}
	defer f.Close()
	if _, err := f.WriteString(r.in.Kubeconfig); err != nil {
		return failure.New(failure.Internal, "writing the kubeconfig to a temporary file", err)
	}
	r.env["KUBECONFIG"] = f.Name()
	if r.in.RegistryPassword != "" {
		r.env["AF_REGISTRY_USERNAME"], r.env["AF_REGISTRY_PASSWORD"] = r.in.RegistryUsername, r.in.RegistryPassword
	}
	// What af pushes with (often the job's own token) is never written into the cluster: the
	// pods' pull secret is the pull-only credential the workflow names, or none.
	r.env["AF_REGISTRY_PUSH_ONLY"] = "1"
	if r.in.PullPassword != "" {
		r.env["AF_REGISTRY_PULL_USERNAME"], r.env["AF_REGISTRY_PULL_PASSWORD"] = r.in.PullUsername, r.in.PullPassword
	}
	return nil
}

func (r *run) tempDir() string {
	if t := r.d.Getenv("RUNNER_TEMP"); t != "" {
		if st, err := os.Stat(t); err == nil && st.IsDir() {
			return t
		}
	}
	return os.TempDir()
}

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

// target names the environment and builds its runtime: what down and status do first.
func (r *run) target() (afruntime.Ref, afruntime.Runtime, error) {
	ref, err := r.ref()
	if err != nil {
		return ref, nil, err
	}
	rt, err := r.runtime()
	if err != nil {
		return ref, nil, err
	}
	return r.adopt(context.Background(), rt, ref), rt, nil
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
