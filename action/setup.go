package action

// The run's setup: the client to GitHub and the pull request's reporter, the workspace, and the
// kubeconfig input in a private file.

import (
	"os"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/api"
	"github.com/antifailure/af/github/report"
)

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
