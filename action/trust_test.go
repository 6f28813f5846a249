package action_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/githubtest"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/runtime/runtimetest"
)

// The base branch's af.yaml: the operator's settings.
var baseShop = strings.Replace(shop, "  provider: kubernetes\n", `  provider: kubernetes
  domain: preview.acme.test
  registry: registry.acme.test/previews
  namespace_prefix: af-env-
  ttl: 72h
`, 1) + `database:
  provider: url
  url_from: PREVIEW_DATABASE_URL
limits:
  replicas: 2
  cpu: 500m
  memory: 512Mi
`

var baseSHA = strings.Repeat("b", 40)

// upSpec runs the action for pull request 7 with prText in the workspace and baseShop on the
// base branch, and returns the one Up call's spec holder.
func runPR(t *testing.T, prText string, tune func(j *job)) (*job, runtimetest.Call, string) {
	t.Helper()
	gh := githubtest.New(t, token)
	gh.SetFile("main", "af.yaml", baseShop)
	rt := &runtimetest.Fake{UpResult: upResult("shop-pr-7")}
	j := newJob(t, gh, rt, prText)
	if tune != nil {
		tune(j)
	}
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 7, sha1, false))
	o, log := j.run()
	var up runtimetest.Call
	for _, c := range rt.Calls() {
		if c.Method == "Up" {
			up = c
		}
	}
	if o.Err != nil {
		return j, up, log + "\nERR " + o.Err.Error()
	}
	return j, up, log
}

// A pull request's af.yaml cannot move the operator's settings: each base-only field it
// changes runs as the base branch has it, is warned of by name, and the comment lists it;
// sizes above the base branch's limits run at the limit.
func TestPullRequestCannotSetOperatorSettings(t *testing.T) {
	pr := strings.Replace(baseShop, "domain: preview.acme.test", "domain: prod.acme.test", 1)
	pr = strings.Replace(pr, "registry: registry.acme.test/previews", "registry: 127.0.0.1:9/steal", 1)
	pr = strings.Replace(pr, "namespace_prefix: af-env-", "namespace_prefix: kube-", 1)
	pr = strings.Replace(pr, "ttl: 72h", "ttl: 90d", 1)
	pr = strings.Replace(pr, "fork_policy: label", "fork_policy: always", 1)
	pr = strings.Replace(pr, "url_from: PREVIEW_DATABASE_URL", "url_from: INPUT_TOKEN", 1)
	pr = strings.Replace(pr, "  replicas: 2\n  cpu: 500m", "  replicas: 20\n  cpu: \"64\"", 1)
	pr = strings.Replace(pr, "    port: 8080\n", "    port: 8080\n    replicas: 20\n    resources: {cpu: \"64\", memory: 256Gi}\n", 1)
	j, up, log := runPR(t, pr, nil)
	if up.Method == "" {
		t.Fatalf("the environment was not brought up:\n%s", log)
	}
	m := up.Spec.Manifest
	if m.Runtime.Domain != "preview.acme.test" || m.Runtime.Registry != "registry.acme.test/previews" || m.Runtime.NamespacePrefix != "af-env-" ||
		m.Runtime.TTL != "72h" || m.GitHub.ForkPolicy != "label" || m.Database.URLFrom != "PREVIEW_DATABASE_URL" || m.Limits.Replicas != 2 {
		t.Fatalf("ran with the pull request's settings: runtime %+v github %+v database %+v limits %+v", m.Runtime, m.GitHub, m.Database, m.Limits)
	}
	web := m.Services["web"]
	if web.Replicas != 2 || web.Resources.CPU != "500m" || web.Resources.Memory != "512Mi" {
		t.Fatalf("web runs %d × %s/%s, want the base branch's limits 2 × 500m/512Mi", web.Replicas, web.Resources.CPU, web.Resources.Memory)
	}
	fields := []string{"runtime.domain", "runtime.registry", "runtime.namespace_prefix", "runtime.ttl", "github.fork_policy", "database", "limits.replicas", "limits.cpu",
		"services.web.replicas", "services.web.resources.cpu", "services.web.resources.memory"}
	body := strings.ReplaceAll(j.gh.Comments(7)[0].Body, "\\", "") // markdown escapes read away
	for _, f := range fields {
		if !strings.Contains(log, "::warning::af.yaml: "+f+": ") {
			t.Errorf("no warning names %s:\n%s", f, log)
		}
		if !strings.Contains(body, f) {
			t.Errorf("the comment does not list %s:\n%s", f, body)
		}
	}
}

// database.url_from can never read af's, GitHub's, the runner's or an input's variable into a
// service: from the pull request it is ignored (the base branch's runs), and from the base
// branch it is refused. The secret's value appears nowhere.
func TestURLFromNeverReadsAfsSecrets(t *testing.T) {
	secrets := map[string]string{
		"INPUT_KUBECONFIG":      "", // the kubeconfig input itself
		"INPUT_TOKEN":           token,
		"GITHUB_TOKEN":          "ghs_githubtoken-s3cret",
		"ACTIONS_RUNTIME_TOKEN": "actions-runtime-s3cret",
		"AF_REGISTRY_PASSWORD":  "registry-s3cret",
	}
	tune := func(j *job) {
		j.env["GITHUB_TOKEN"], j.env["ACTIONS_RUNTIME_TOKEN"] = secrets["GITHUB_TOKEN"], secrets["ACTIONS_RUNTIME_TOKEN"]
		j.env["PREVIEW_DATABASE_URL"] = "postgres://preview@db.acme.test/shop"
		j.inputs["registry"], j.inputs["registry-username"], j.inputs["registry-password"] = "registry.acme.test/previews", "ci", secrets["AF_REGISTRY_PASSWORD"]
	}
	for name := range secrets {
		values := []string{secrets[name], "kubetoken-s3cret-value"}
		if name == "INPUT_KUBECONFIG" {
			values = values[1:]
		}
		noLeak := func(t *testing.T, j *job, log string) {
			t.Helper()
			var written []string
			for _, c := range j.gh.Comments(7) {
				written = append(written, c.Body)
			}
			for _, c := range j.gh.CheckRuns() {
				written = append(written, c.Title, c.Summary, c.Text)
			}
			// The log's ::add-mask:: commands are how the runner learns to hide each value.
			var lines []string
			for _, l := range strings.Split(log, "\n") {
				if !strings.HasPrefix(l, "::add-mask::") {
					lines = append(lines, l)
				}
			}
			all := strings.Join(append(written, strings.Join(lines, "\n"), j.summary, j.output), "\n")
			for _, v := range values {
				if strings.Contains(all, v) {
					t.Errorf("%s's value %q appears in the log or the report", name, v)
				}
			}
		}
		t.Run("pull request names "+name, func(t *testing.T) {
			pr := strings.Replace(baseShop, "url_from: PREVIEW_DATABASE_URL", "url_from: "+name, 1)
			j, up, log := runPR(t, pr, tune)
			if up.Method == "" {
				t.Fatalf("not brought up:\n%s", log)
			}
			if got := up.Spec.Manifest.Database.URLFrom; got != "PREVIEW_DATABASE_URL" {
				t.Fatalf("url_from %s ran", got)
			}
			if got := up.Spec.Getenv(name); got != "" {
				t.Fatalf("the runtime can read %s: %q", name, got)
			}
			if got := up.Spec.Getenv("PREVIEW_DATABASE_URL"); got != "postgres://preview@db.acme.test/shop" {
				t.Fatalf("the runtime reads PREVIEW_DATABASE_URL as %q", got)
			}
			noLeak(t, j, log)
		})
		t.Run("base branch names "+name, func(t *testing.T) {
			gh := githubtest.New(t, token)
			text := strings.Replace(baseShop, "url_from: PREVIEW_DATABASE_URL", "url_from: "+name, 1)
			gh.SetFile("main", "af.yaml", text)
			rt := &runtimetest.Fake{UpResult: upResult("shop-pr-7")}
			j := newJob(t, gh, rt, text)
			tune(j)
			j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 7, sha1, false))
			o, log := j.run()
			if !errors.Is(o.Err, failure.ManifestInvalid) || !strings.Contains(o.Err.Error(), "PREVIEW_") {
				t.Fatalf("err %v, want the url_from refused\n%s", o.Err, log)
			}
			for _, c := range rt.Calls() {
				if c.Method == "Up" {
					t.Fatal("the environment was brought up")
				}
			}
			if c := gh.CheckRuns(); len(c) != 1 || c[0].Conclusion != "failure" {
				t.Fatalf("check runs %+v, want the refusal reported", c)
			}
			noLeak(t, j, log)
		})
	}
}

// Registry credentials go only to the registry input's host: a pull request's runtime.registry
// never decides where they are sent, and credentials without the input are refused.
func TestRegistryCredentialsOnlyToTheInputRegistry(t *testing.T) {
	pr := strings.Replace(baseShop, "registry: registry.acme.test/previews", "registry: 127.0.0.1:9/steal", 1)
	_, up, log := runPR(t, pr, func(j *job) {
		j.inputs["registry"], j.inputs["registry-username"], j.inputs["registry-password"] = "ghcr.io/acme/previews", "ci", "registry-s3cret"
	})
	if up.Method == "" || up.Spec.Manifest.Runtime.Registry != "ghcr.io/acme/previews" {
		t.Fatalf("registry %q, want the input's\n%s", up.Spec.Manifest.Runtime.Registry, log)
	}
	_, up, log = runPR(t, pr, func(j *job) {
		j.inputs["registry-username"], j.inputs["registry-password"] = "ci", "registry-s3cret"
	})
	if up.Method != "" || !strings.Contains(log, "AF-GH-001") || !strings.Contains(log, "registry") {
		t.Fatalf("credentials without the registry input were not refused:\n%s", log)
	}
	_, up, log = runPR(t, pr, nil)
	if up.Method == "" || up.Spec.Manifest.Runtime.Registry != "registry.acme.test/previews" {
		t.Fatalf("registry %q, want the base branch's\n%s", fmt.Sprint(up.Spec.Manifest.Runtime.Registry), log)
	}
}

// Two repositories of the same name on one cluster: when other/shop's pull request 7 holds
// shop-pr-7, acme/shop's gets an id with its owner, comes up, and is found by it afterwards.
func TestSameNameOtherOwner(t *testing.T) {
	gh := githubtest.New(t, token)
	gh.SetFile("main", "af.yaml", shop)
	rt := &runtimetest.Fake{Taken: map[string]string{"shop-pr-7": "other/shop"}}
	j := newJob(t, gh, rt, shop)
	j.event("pull_request", githubtest.PullRequestEvent(t, "opened", "acme/shop", 7, sha1, false))
	o, log := j.run()
	if o.Exit != 0 || o.Facts == nil || o.Facts.Environment != "acme-shop-pr-7" {
		t.Fatalf("exit %d (%v), environment %v\n%s", o.Exit, o.Err, o.Facts, log)
	}
	if !strings.Contains(j.output, "acme-shop-pr-7") || !strings.Contains(gh.Comments(7)[0].Body, "acme-shop-pr-7") {
		t.Fatalf("the outputs or the comment do not name acme-shop-pr-7:\n%s\n%s", j.output, gh.Comments(7)[0].Body)
	}
	// Closed: down finds it by its repository and number, not by the short id.
	rt.Envs = []afruntime.Environment{{ID: "acme-shop-pr-7", Namespace: "af-env-acme-shop-pr-7", Repository: "acme/shop", PullRequest: 7}}
	j.inputs["command"] = "down"
	j.event("pull_request", githubtest.PullRequestEvent(t, "closed", "acme/shop", 7, sha1, false))
	if o, log := j.run(); o.Exit != 0 {
		t.Fatalf("down: exit %d (%v)\n%s", o.Exit, o.Err, log)
	}
	var downs []string
	for _, c := range rt.Calls() {
		if c.Method == "Down" {
			downs = append(downs, c.Ref.ID)
		}
	}
	if len(downs) != 1 || downs[0] != "acme-shop-pr-7" {
		t.Fatalf("down removed %v, want acme-shop-pr-7", downs)
	}
}

// The operator's policy is the default branch's at its head, never the pull request's base:
// its author picks the base, and can move it after an approval to a stale branch whose af.yaml
// says fork_policy: always (or has none). Here the base commit says always and the default
// branch says label: the fork, unlabelled, is not deployed, and its settings are main's.
func TestPolicyFromTheDefaultBranch(t *testing.T) {
	stale := strings.Replace(baseShop, "fork_policy: label", "fork_policy: always", 1)
	stale = strings.Replace(stale, "domain: preview.acme.test", "domain: stale.acme.test", 1)
	for _, labelled := range []bool{false, true} {
		t.Run(map[bool]string{false: "unapproved", true: "approved by the label"}[labelled], func(t *testing.T) {
			gh := githubtest.New(t, token)
			gh.SetFile(baseSHA, "af.yaml", stale) // the base commit the event names
			gh.SetFile("stale", "af.yaml", stale) // and its branch
			gh.SetFile("main", "af.yaml", baseShop)
			var labels []string
			if labelled {
				labels = []string{"af-preview"}
			}
			gh.SetLabels(11, labels...)
			rt := &runtimetest.Fake{UpResult: upResult("shop-pr-11")}
			j := newJob(t, gh, rt, stale)
			j.event("pull_request_target", githubtest.PullRequestEvent(t, "labeled", "acme/shop", 11, sha1, true, labels...))
			o, log := j.run()
			var up runtimetest.Call
			for _, c := range rt.Calls() {
				if c.Method == "Up" {
					up = c
				}
			}
			if !labelled {
				if up.Method != "" || !errors.Is(o.Err, failure.ForkNotApproved) {
					t.Fatalf("a fork ran under the base commit's fork_policy: always (err %v)\n%s", o.Err, log)
				}
				return
			}
			if up.Method == "" {
				t.Fatalf("not brought up: %v\n%s", o.Err, log)
			}
			if d := up.Spec.Manifest.Runtime.Domain; d != "preview.acme.test" {
				t.Fatalf("domain %q, want the default branch's preview.acme.test", d)
			}
		})
	}
}

// The job's token is never written into the cluster: af pushes with whatever registry-password
// is (often the job's token) but keeps it out of the cluster (AF_REGISTRY_PUSH_ONLY), and the
// pods' pull secret is the pull-only credential the workflow names, which may not be a token
// of this job.
func TestJobTokenNeverAPullSecret(t *testing.T) {
	for _, c := range []struct{ name, pull, want string }{
		{"the token input", token, "never writes it into the cluster"},
		{"the registry password", "registry-s3cret", "never writes it into the cluster"},
		{"a ghs_ token", "ghs_someothertoken0123456789", "never writes it into the cluster"},
		{"a pull-only credential", "read-only-pull-s3cret", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, up, log := runPR(t, baseShop, func(j *job) {
				j.inputs["registry"], j.inputs["registry-username"], j.inputs["registry-password"] = "registry.acme.test/previews", "ci", "registry-s3cret"
				j.inputs["pull-username"], j.inputs["pull-password"] = "puller", c.pull
			})
			if c.want != "" {
				if up.Method != "" || !strings.Contains(log, "::error::AF-GH-001") || !strings.Contains(log, c.want) {
					t.Fatalf("not refused:\n%s", log)
				}
				return
			}
			if up.Method == "" {
				t.Fatalf("not brought up:\n%s", log)
			}
			if env := j.runtimeEnv; env("AF_REGISTRY_PUSH_ONLY") != "1" || env("AF_REGISTRY_PULL_USERNAME") != "puller" || env("AF_REGISTRY_PULL_PASSWORD") != c.pull {
				t.Fatalf("the runtime's settings: push-only %q, pull %q/%q", env("AF_REGISTRY_PUSH_ONLY"), env("AF_REGISTRY_PULL_USERNAME"), env("AF_REGISTRY_PULL_PASSWORD"))
			}
			if !strings.Contains(log, "::add-mask::"+c.pull) || strings.Count(log, c.pull) != 1 {
				t.Fatalf("the pull password is not masked first, or shown besides:\n%s", log)
			}
		})
	}
}
