// Package action is the GitHub Action (`af action`, the entrypoint of the container action in
// action.yml): it reads the inputs and the event, decides what a pull request may run (the fork
// policy and the egress approval), brings the environment up, takes it down or reads its
// status through the same runtime and image code the af commands use, and reports the result
// on the pull request (package github/report), in the step summary and in the step's outputs. The
// step's exit status is the environment's, whatever the reporting did.
package action

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/antifailure/af/failure"
)

// Inputs are the action's inputs, as action.yml declares them.
type Inputs struct {
	Command          string
	Manifest         string
	Kubeconfig       string
	Context          string
	Registry         string
	RegistryUsername string
	RegistryPassword string
	// PullUsername and PullPassword are the pull-only credential written into each
	// environment as its pods' image pull secret; the push credentials never are.
	PullUsername string
	PullPassword string
	Token        string
	PRNumber     int
	Environment  string
	Images       map[string]string
	Timeout      time.Duration
	// Artifact is the directory of the unprivileged build's artifact: where command build
	// writes it, and what command up deploys from under workflow_run.
	Artifact string
}

// InputNames are every input action.yml declares, in its order (a test keeps them equal).
var InputNames = []string{"command", "manifest", "kubeconfig", "context", "registry", "registry-username",
	"registry-password", "pull-username", "pull-password", "token", "pr-number", "environment", "images", "timeout", "artifact"}

func invalid(input, format string, args ...any) error {
	return failure.Newf(failure.ActionInputInvalid, "input %s: %s", input, fmt.Sprintf(format, args...))
}

// ReadInputs reads and checks every input; get returns an input's value (INPUT_<NAME>).
func ReadInputs(get func(name string) string) (Inputs, error) {
	in := Inputs{Command: get("command"), Manifest: get("manifest"), Kubeconfig: get("kubeconfig"), Context: get("context"),
		Registry: get("registry"), RegistryUsername: get("registry-username"), RegistryPassword: get("registry-password"),
		PullUsername: get("pull-username"), PullPassword: get("pull-password"),
		Token: get("token"), Environment: get("environment"), Artifact: get("artifact")}
	if in.Command == "" {
		in.Command = "up"
	}
	switch in.Command {
	case "up", "down", "status", "build":
	default:
		return in, invalid("command", "%q is not one of up, down, status, build", in.Command)
	}
	if in.Manifest == "" {
		in.Manifest = "af.yaml"
	}
	if path.IsAbs(in.Manifest) || strings.HasPrefix(path.Clean(in.Manifest), "..") {
		return in, invalid("manifest", "%q must be a path inside the repository (relative, no ..)", in.Manifest)
	}
	if in.Artifact == "" && in.Command == "build" {
		in.Artifact = "af-artifact"
	}
	if in.Artifact != "" && (path.IsAbs(in.Artifact) || strings.HasPrefix(path.Clean(in.Artifact), "..")) {
		return in, invalid("artifact", "%q must be a directory inside the workspace (relative, no ..)", in.Artifact)
	}
	if in.Command == "build" {
		// The unprivileged build holds no secret: it needs neither the kubeconfig nor a token.
		return in, readImages(get, &in)
	}
	if in.Kubeconfig == "" {
		return in, invalid("kubeconfig", "is empty: pass the kubeconfig's content from a secret (kubeconfig: ${{ secrets.KUBECONFIG }})")
	}
	if !strings.Contains(in.Kubeconfig, "clusters") || !strings.Contains(in.Kubeconfig, "users") {
		return in, invalid("kubeconfig", "is not a kubeconfig's content (it names no clusters and users); pass the file's content, not its path")
	}
	if files := fileRefs(in.Kubeconfig); len(files) > 0 {
		return in, invalid("kubeconfig", "names files (%s) that the action's container cannot read: pass a self-contained kubeconfig (kubectl config view --flatten --raw)", strings.Join(files, ", "))
	}
	if in.Token == "" {
		return in, invalid("token", "is empty: leave its default (${{ github.token }}) or pass a token with pull-requests, issues, checks and deployments write")
	}
	if in.RegistryPassword != "" && in.Registry == "" {
		return in, invalid("registry-password", "registry credentials go only to the registry the workflow names: set the registry input too (a pull request's af.yaml never decides where they are sent)")
	}
	if (in.PullUsername == "") != (in.PullPassword == "") {
		return in, invalid("pull-password", "pull-username and pull-password go together: both, or neither (then no pull secret is written and the cluster pulls on its own)")
	}
	if in.PullPassword != "" && in.Registry == "" {
		return in, invalid("pull-password", "a pull credential goes only to the registry the workflow names: set the registry input too")
	}
	if in.PullPassword != "" && (in.PullPassword == in.Token || in.PullPassword == in.RegistryPassword || strings.HasPrefix(in.PullPassword, "ghs_")) {
		return in, invalid("pull-password", "is a token of this job (the token or registry-password input, or a ghs_ token): it carries the job's write scopes and expires with the job, and af never writes it into the cluster. Pass a pull-only credential (for GHCR, a token with read:packages only) from a secret")
	}
	if s := get("pr-number"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return in, invalid("pr-number", "%q is not a pull request number", s)
		}
		in.PRNumber = n
	}
	return in, readImages(get, &in)
}

// readImages reads the images input, and the timeout.
func readImages(get func(name string) string, in *Inputs) error {
	in.Timeout = 30 * time.Minute
	if s := get("timeout"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return invalid("timeout", "%q is not a duration such as 20m", s)
		}
		in.Timeout = d
	}
	in.Images = map[string]string{}
	for i, line := range strings.Split(get("images"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return invalid("images", "line %d %q: write SERVICE=REF, one per line", i+1, line)
		}
		if _, dup := in.Images[k]; dup {
			return invalid("images", "names service %s twice", k)
		}
		in.Images[k] = v
	}
	return nil
}

// fileRefs returns the kubeconfig keys that name files instead of holding the data.
func fileRefs(kubeconfig string) []string {
	var out []string
	for _, line := range strings.Split(kubeconfig, "\n") {
		k, _, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), ":")
		if !ok {
			continue
		}
		switch k = strings.TrimSpace(k); k {
		case "client-certificate", "client-key", "certificate-authority", "tokenFile":
			out = append(out, k)
		}
	}
	return out
}

// secretsOf returns the values in a kubeconfig that must never be printed: keys, tokens,
// passwords and client certificates.
func secretsOf(kubeconfig string) []string {
	var out []string
	for _, line := range strings.Split(kubeconfig, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "client-key-data", "client-certificate-data", "token", "password", "id-token", "refresh-token", "client-secret":
			if v = strings.Trim(strings.TrimSpace(v), `"'`); len(v) >= 4 {
				out = append(out, v)
			}
		}
	}
	return out
}

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
