// Package docs_test checks what the documentation tells people to run: every GitHub workflow
// in docs/github.md is valid (actionlint) and safe (no pull request's code where the cluster
// credentials are, no checkout that keeps its token, only inputs the action declares), and the
// CI identity in deploy/ci grants exactly what the Kubernetes runtime needs.
package docs_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/antifailure/af/internal/testreq"
	"github.com/antifailure/af/version"
)

const githubMD = "github.md"

// block is one fenced code block of a Markdown file.
type block struct {
	line int    // the line of its first content line, from 1
	lang string // the info string's first word
	text string // its content, the fence's indentation removed
}

// fencedBlocks returns every fenced code block of md, nested fences (```` around ```) taken
// as the content of the outer one.
func fencedBlocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		indent := len(lines[i]) - len(trimmed)
		fence := leadingRun(trimmed)
		if len(fence) < 3 {
			continue
		}
		lang, _, _ := strings.Cut(strings.TrimSpace(trimmed[len(fence):]), " ")
		b := block{line: i + 2, lang: lang}
		var body []string
		for i++; i < len(lines); i++ {
			t := strings.TrimLeft(lines[i], " ")
			if strings.HasPrefix(t, fence) && strings.TrimSpace(strings.TrimLeft(t, fence[:1])) == "" {
				break
			}
			l := lines[i]
			for n := 0; n < indent && strings.HasPrefix(l, " "); n++ {
				l = l[1:]
			}
			body = append(body, l)
		}
		b.text = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out
}

// leadingRun returns s's leading run of backticks or tildes.
func leadingRun(s string) string {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return ""
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	return s[:n]
}

// step and job are what the checks read of a workflow.
type step struct {
	ID   string            `yaml:"id"`
	Name string            `yaml:"name"`
	Uses string            `yaml:"uses"`
	Run  string            `yaml:"run"`
	With map[string]any    `yaml:"with"`
	Env  map[string]string `yaml:"env"`
}

type job struct {
	If    string `yaml:"if"`
	Steps []step `yaml:"steps"`
	text  string // the job as YAML, for what it references
}

type workflow struct {
	block
	name     string
	triggers []string
	jobs     map[string]job
}

// parseWorkflow reads b as a workflow: ok is false when it is not one (no top-level on and
// jobs).
func parseWorkflow(b block) (workflow, bool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(b.text), &doc); err != nil {
		return workflow{}, false, err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return workflow{}, false, nil
	}
	top := map[string]*yaml.Node{}
	for i := 0; i+1 < len(doc.Content[0].Content); i += 2 {
		top[doc.Content[0].Content[i].Value] = doc.Content[0].Content[i+1]
	}
	if top["on"] == nil || top["jobs"] == nil {
		return workflow{}, false, nil
	}
	w := workflow{block: b, jobs: map[string]job{}}
	if n := top["name"]; n != nil {
		w.name = n.Value
	}
	switch on := top["on"]; on.Kind {
	case yaml.ScalarNode:
		w.triggers = []string{on.Value}
	case yaml.SequenceNode:
		for _, n := range on.Content {
			w.triggers = append(w.triggers, n.Value)
		}
	case yaml.MappingNode:
		for i := 0; i < len(on.Content); i += 2 {
			w.triggers = append(w.triggers, on.Content[i].Value)
		}
	}
	jobs := top["jobs"]
	for i := 0; i+1 < len(jobs.Content); i += 2 {
		var j job
		if err := jobs.Content[i+1].Decode(&j); err != nil {
			return w, true, fmt.Errorf("job %s: %v", jobs.Content[i].Value, err)
		}
		var buf bytes.Buffer
		if err := yaml.NewEncoder(&buf).Encode(jobs.Content[i+1]); err != nil {
			return w, true, err
		}
		j.text = buf.String()
		w.jobs[jobs.Content[i].Value] = j
	}
	return w, true, nil
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// workflows returns every workflow of docs/github.md; it fails on a YAML block that does not
// parse.
func workflows(t *testing.T) []workflow {
	t.Helper()
	var out []workflow
	for _, b := range fencedBlocks(readDoc(t, githubMD)) {
		if b.lang != "yaml" {
			continue
		}
		w, ok, err := parseWorkflow(b)
		if err != nil {
			t.Errorf("%s:%d: the YAML block does not parse: %v", githubMD, b.line, err)
			continue
		}
		if ok {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no workflow (a yaml block with on: and jobs:)", githubMD)
	}
	return out
}

// actionlintModule is the actionlint make lint runs (the Makefile's ACTIONLINT), so that this
// test and the lint phase judge alike.
func actionlintModule(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^ACTIONLINT\s*:=\s*(\S+@\S+)\s*$`).FindStringSubmatch(readDoc(t, "../Makefile"))
	if m == nil {
		t.Fatal("the Makefile names no ACTIONLINT := module@version")
	}
	return m[1]
}

// actionlint returns the actionlint binary: on PATH, in ~/go/bin, or in ~/.cache/af, where it
// is installed once (go install of the Makefile's version, as the tests install nektos/act).
func actionlint(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("actionlint"); err == nil {
		return p
	}
	mod := actionlintModule(t)
	_, ver, _ := strings.Cut(mod, "@")
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	cache := filepath.Join(home, ".cache", "af", "actionlint-"+ver)
	for _, p := range []string{filepath.Join(home, "go", "bin", "actionlint"), filepath.Join(cache, "actionlint"), filepath.Join(home, ".cache", "af", "actionlint")} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		testreq.Missing(t, "actionlint is not installed and there is no go to install %s", mod)
		return ""
	}
	cmd := exec.Command(goBin, "install", mod)
	cmd.Env = append(os.Environ(), "GOBIN="+cache, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	cmd.Dir = os.TempDir()
	if out, err := cmd.CombinedOutput(); err != nil {
		testreq.Missing(t, "actionlint is not installed, and go install %s failed: %v\n%s", mod, err, out)
		return ""
	}
	return filepath.Join(cache, "actionlint")
}

// Every workflow in docs/github.md is one actionlint accepts. The action itself
// (antifailure/af@…) cannot be fetched here, so its inputs are checked against action.yml by
// TestDocWorkflowsAreSafe instead.
func TestDocWorkflowsLint(t *testing.T) {
	wfs := workflows(t)
	bin := actionlint(t)
	for _, w := range wfs {
		t.Run(fmt.Sprintf("line %d %s", w.line, w.name), func(t *testing.T) {
			dir := t.TempDir()
			wdir := filepath.Join(dir, ".github", "workflows")
			if err := os.MkdirAll(wdir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(wdir, fmt.Sprintf("line%d.yml", w.line))
			if err := os.WriteFile(file, []byte(w.text), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-no-color", file)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				// The report's positions, as lines of the page.
				out = lintPos.ReplaceAllFunc(out, func(m []byte) []byte {
					sub := lintPos.FindSubmatch(m)
					row, _ := strconv.Atoi(string(sub[1]))
					return fmt.Appendf(nil, "%s:%d:%s:", githubMD, w.line+row-1, sub[2])
				})
				t.Errorf("%s:%d (workflow %s): actionlint: %v\n%s", githubMD, w.line, w.name, err, out)
			}
		})
	}
}

// lintPos is a position in actionlint's report: the temporary file's row and column.
var lintPos = regexp.MustCompile(`\S*line\d+\.yml:(\d+):(\d+):`)

// privileged are the events whose runs hold the repository's secrets while a pull request,
// possibly a fork's, is what they are about.
var privileged = []string{"pull_request_target", "workflow_run", "issue_comment", "pull_request_review", "pull_request_review_comment"}

// prCode matches a ref or repository that names a pull request's code instead of the base
// branch's.
var prCode = regexp.MustCompile(`(?i)head|merge|refs/pull|github\.event\.(pull_request|workflow_run|issue|comment)|github\.head_ref`)

// actionInputs are the inputs action.yml declares.
func actionInputs(t *testing.T) map[string]bool {
	t.Helper()
	var a struct {
		Inputs map[string]any `yaml:"inputs"`
	}
	if err := yaml.Unmarshal([]byte(readDoc(t, "../action.yml")), &a); err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for k := range a.Inputs {
		in[k] = true
	}
	return in
}

func isFalse(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		return v == "false"
	}
	return false
}

const afAction = "antifailure/af@"

// The workflows keep a pull request's code away from the cluster credentials, keep tokens off
// the disk, and give the action only what it reads.
func TestDocWorkflowsAreSafe(t *testing.T) {
	inputs := actionInputs(t)
	for _, w := range workflows(t) {
		t.Run(fmt.Sprintf("line %d %s", w.line, w.name), func(t *testing.T) {
			at := fmt.Sprintf("%s:%d (workflow %s)", githubMD, w.line, w.name)
			isPrivileged := slices.ContainsFunc(w.triggers, func(e string) bool { return slices.Contains(privileged, e) })
			for _, jn := range slices.Sorted(maps.Keys(w.jobs)) {
				j := w.jobs[jn]
				credentials := strings.Contains(j.text, "AF_KUBECONFIG")
				secrets := strings.Contains(j.text, "secrets.")
				for i, s := range j.Steps {
					what := s.Uses
					if what == "" {
						what = "run"
					}
					where := fmt.Sprintf("%s job %s step %d (%s)", at, jn, i+1, what)
					if _, ok := s.With["allow-unsafe-pr-checkout"]; ok {
						t.Errorf("%s sets allow-unsafe-pr-checkout: a pull request's code next to the secrets is the pwn request checkout refuses", where)
					}
					if strings.HasPrefix(s.Uses, "actions/checkout@") {
						if !isFalse(s.With["persist-credentials"]) {
							t.Errorf("%s checks out without persist-credentials: false", where)
						}
						ref, _ := s.With["ref"].(string)
						repo, _ := s.With["repository"].(string)
						if credentials && (prCode.MatchString(ref) || prCode.MatchString(repo)) {
							t.Errorf("%s holds AF_KUBECONFIG and checks out a pull request's code (ref %q, repository %q)", where, ref, repo)
						}
						if isPrivileged && secrets && (ref != "" || repo != "") {
							t.Errorf("%s runs on %v with secrets and checks out ref %q repository %q: only the default checkout (the base branch) belongs there", where, w.triggers, ref, repo)
						}
					}
					if isPrivileged && secrets && (strings.HasPrefix(s.Uses, "docker/build-push-action@") || strings.Contains(s.Run, "docker build") || strings.Contains(s.Run, "docker buildx")) {
						t.Errorf("%s builds in a privileged job: a pull request's Dockerfiles would run beside the secrets", where)
					}
					if !strings.HasPrefix(s.Uses, afAction) {
						continue
					}
					if v := strings.TrimPrefix(s.Uses, afAction); v != version.Release {
						t.Errorf("%s uses the action at %s, not the release action.yml names (%s)", where, v, version.Release)
					}
					for k := range s.With {
						if !inputs[k] {
							t.Errorf("%s gives the action input %q, which action.yml does not declare", where, k)
						}
					}
					command, _ := s.With["command"].(string)
					switch command {
					case "", "up", "down", "status":
						if credentials && s.With["kubeconfig"] == nil {
							t.Errorf("%s runs command %q without the kubeconfig input", where, command)
						}
						if (command == "" || command == "up") && slices.Contains(w.triggers, "workflow_run") && s.With["artifact"] == nil {
							t.Errorf("%s brings a pull request up under workflow_run without its build's artifact", where)
						}
					case "build":
						if secrets || isPrivileged {
							t.Errorf("%s runs command build, a pull request's code, in a job that holds secrets or runs on %v", where, w.triggers)
						}
					default:
						t.Errorf("%s gives command %q", where, command)
					}
				}
			}
		})
	}
}

// Every reference to the action in the page's YAML (snippets too) is the release action.yml
// names, and every link to a heading of the page leads somewhere.
func TestDocReferences(t *testing.T) {
	md := readDoc(t, githubMD)
	uses := regexp.MustCompile(regexp.QuoteMeta(afAction) + `(\S+)`)
	for _, b := range fencedBlocks(md) {
		if b.lang != "yaml" {
			continue
		}
		var v any
		if err := yaml.Unmarshal([]byte(b.text), &v); err != nil {
			t.Errorf("%s:%d: the YAML block does not parse: %v", githubMD, b.line, err)
		}
		for _, m := range uses.FindAllStringSubmatch(b.text, -1) {
			if m[1] != version.Release {
				t.Errorf("%s:%d: uses %s%s, not the release action.yml names (%s)", githubMD, b.line, afAction, m[1], version.Release)
			}
		}
	}
	anchors := map[string]bool{}
	inFence := ""
	for _, line := range strings.Split(md, "\n") {
		if f := leadingRun(strings.TrimLeft(line, " ")); len(f) >= 3 {
			switch {
			case inFence == "":
				inFence = f
			case strings.HasPrefix(f, inFence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), f[:1])) == "":
				inFence = ""
			}
			continue
		}
		if inFence == "" && strings.HasPrefix(line, "#") {
			anchors[slug(strings.TrimLeft(line, "# "))] = true
		}
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(md, -1) {
		if !anchors[m[1]] {
			t.Errorf("%s links to #%s, which is no heading of it", githubMD, m[1])
		}
	}
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case r > 127 && (r < 0x2000 || r > 0x2BFF) && (r < 0x1F000): // letters of other scripts stay; emoji and symbols go
			b.WriteRune(r)
		}
	}
	return b.String()
}

// ciNeeds is what the af action does on the cluster (runtime/kubernetes, for command up, down
// and status, and af reap), as API group, resource and verb: deploy/ci/clusterrole.yaml must
// grant exactly these.
var ciNeeds = []struct {
	group, resource string
	verbs           []string
	why             string
}{
	{"", "namespaces", []string{"get", "list", "watch", "create", "patch", "delete"}, "the environment's namespace (namespace.go), the probe's verdict annotation (probe.go), down and its wait (down.go, apiwatch.go), af reap (environments.go)"},
	{"", "nodes", []string{"list"}, "the capacity preflight (preflight.go) and the cluster's ranges (ranges.go)"},
	{"networking.k8s.io", "servicecidrs", []string{"list"}, "the Service range (ranges.go)"},
	{"networking.k8s.io", "ingressclasses", []string{"list"}, "the preview Ingresses' controller, unless AF_INGRESS_CONTROLLER names it (ingressctl.go)"},
	{"authorization.k8s.io", "selfsubjectaccessreviews", []string{"create"}, "asking before a port-forward (forward.go)"},
	{"networking.k8s.io", "networkpolicies", []string{"create", "patch"}, "server-side apply of the policies (up.go, apply.go)"},
	{"networking.k8s.io", "ingresses", []string{"create", "patch"}, "server-side apply of the preview Ingresses (ingress.go)"},
	{"", "secrets", []string{"create", "patch"}, "server-side apply of the sidecar's configuration, the database URL and the pull secret (sidecar.go, images.go)"},
	{"", "services", []string{"get", "create", "patch"}, "the Services and holds (sidecar.go, services.go, holds.go); the resolver's and default/kubernetes (namespace.go, ranges.go)"},
	{"", "resourcequotas", []string{"get", "watch", "create", "patch", "delete"}, "the environment's quota: server-side apply, its status and the wait for it, removed when no controller takes it up (quota.go, status.go)"},
	{"", "limitranges", []string{"create", "patch"}, "server-side apply of the environment's limit range (quota.go)"},
	{"apps", "deployments", []string{"get", "list", "watch", "create", "patch"}, "the sidecar and the services, their readiness, its wait, and status (sidecar.go, services.go, wait.go, apiwatch.go, status.go)"},
	{"batch", "jobs", []string{"get", "watch", "create", "delete"}, "migrations and their wait (services.go, wait.go)"},
	{"", "pods", []string{"get", "list", "watch", "create", "delete"}, "the probe pod, waits (woken by watches) and status (probe.go, wait.go, status.go), and across namespaces the capacity preflight and the ingress controller's pods (preflight.go, ingressctl.go)"},
	{"", "pods/log", []string{"get"}, "the probe's verdict and a failed pod's lines (probe.go, wait.go)"},
	{"", "pods/portforward", []string{"get", "create"}, "the sidecar's refusals for the comment (forward.go): WebSocket get (and create from 1.35), SPDY create"},
	{"", "events", []string{"list"}, "why an image pull backs off (wait.go)"},
	{"coordination.k8s.io", "leases", []string{"get", "list", "create", "update", "delete"}, "the environment's writer lease: one af up at a time (writer.go); across namespaces, the capacity preflight counts what runs going on ask (preflight.go)"},
}

// deployObjects decodes every object of deploy/ci/*.yaml with client-go's scheme: a field
// Kubernetes does not know fails here.
func deployObjects(t *testing.T) []any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "deploy", "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("deploy/ci has no YAML (%v)", err)
	}
	var out []any
	for _, f := range files {
		for _, doc := range strings.Split(readDoc(t, f), "\n---\n") {
			if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) == "" {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, obj)
		}
	}
	return out
}

// deploy/ci is a ServiceAccount no pod mounts, bound cluster-wide to a ClusterRole that grants
// what the runtime needs and nothing else.
func TestCIClusterRole(t *testing.T) {
	var (
		sa       *corev1.ServiceAccount
		role     *rbacv1.ClusterRole
		binding  *rbacv1.ClusterRoleBinding
		policies []*admissionv1.ValidatingAdmissionPolicy
		bindings = map[string]*admissionv1.ValidatingAdmissionPolicyBinding{}
	)
	for _, o := range deployObjects(t) {
		switch v := o.(type) {
		case *corev1.ServiceAccount:
			sa = v
		case *rbacv1.ClusterRole:
			role = v
		case *rbacv1.ClusterRoleBinding:
			binding = v
		case *admissionv1.ValidatingAdmissionPolicy:
			policies = append(policies, v)
		case *admissionv1.ValidatingAdmissionPolicyBinding:
			bindings[v.Spec.PolicyName] = v
		case *corev1.Namespace:
		default:
			t.Errorf("deploy/ci holds a %T, which the CI identity does not need", o)
		}
	}
	if sa == nil || role == nil || binding == nil {
		t.Fatalf("deploy/ci needs a ServiceAccount, a ClusterRole and a ClusterRoleBinding; it has %v, %v, %v", sa != nil, role != nil, binding != nil)
	}
	// The admission policies match exactly this identity and are bound to deny; what they
	// refuse is tried on the cluster (deploy's TestCIIdentityBoundedByTheCluster).
	user := "'system:serviceaccount:" + sa.Namespace + ":" + sa.Name + "'"
	if len(policies) != 2 {
		t.Errorf("deploy/ci has %d admission policies, want 2 (af-ci-previews-only, af-ci-pod-shape)", len(policies))
	}
	for _, p := range policies {
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Fail {
			t.Errorf("policy %s does not fail closed", p.Name)
		}
		matched := false
		for _, c := range p.Spec.MatchConditions {
			matched = matched || c.Expression == "request.userInfo.username == "+user
		}
		if !matched {
			t.Errorf("policy %s does not match %s by its username", p.Name, user)
		}
		b := bindings[p.Name]
		if b == nil || !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
			t.Errorf("policy %s is not bound with Deny: %+v", p.Name, b)
		}
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s/%s: automountServiceAccountToken is not false, though no pod runs as it", sa.Namespace, sa.Name)
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("ClusterRoleBinding %s binds %+v to %+v, not ClusterRole %s to ServiceAccount %s/%s", binding.Name, binding.RoleRef, binding.Subjects, role.Name, sa.Namespace, sa.Name)
	}
	want := map[string]string{}
	for _, n := range ciNeeds {
		for _, v := range n.verbs {
			want[n.group+"/"+n.resource+" "+v] = n.why
		}
	}
	got := map[string]bool{}
	for _, r := range role.Rules {
		if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("rule %+v: nonResourceURLs or resourceNames, which af does not use", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("rule %+v has a wildcard", r)
					}
					got[g+"/"+res+" "+v] = true
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !got[k] {
			t.Errorf("ClusterRole %s does not grant %s, which af needs for %s", role.Name, k, want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("ClusterRole %s grants %s, which af does not need", role.Name, k)
		}
	}
}

// The documented workflows pin every action from elsewhere by its full commit id (a tag can be
// moved to other code; a commit id cannot). af's own action is the release's tag, which the
// release makes.
func TestDocumentedActionsPinned(t *testing.T) {
	b, err := os.ReadFile("github.md")
	if err != nil {
		t.Fatal(err)
	}
	pinned := regexp.MustCompile(`^[\w.-]+/[\w.-]+@[0-9a-f]{40}$`)
	n := 0
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)`).FindAllStringSubmatch(block[1], -1) {
			n++
			if ref := m[1]; !pinned.MatchString(ref) && !strings.HasPrefix(ref, "antifailure/af@") {
				t.Errorf("docs/github.md uses %s: pin it by its full commit id", ref)
			}
		}
	}
	if n == 0 {
		t.Fatal("docs/github.md has no workflow with uses: lines")
	}
	// af's own workflows, the same way.
	own, err := filepath.Glob("../.github/workflows/*.yml")
	if err != nil || len(own) == 0 {
		t.Fatalf("af's workflows: %v %v", own, err)
	}
	for _, f := range own {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)`).FindAllStringSubmatch(string(b), -1) {
			if ref := m[1]; !pinned.MatchString(ref) && !strings.HasPrefix(ref, "./") {
				t.Errorf("%s uses %s: pin it by its full commit id", f, ref)
			}
		}
	}
}

// README's table of the App's permissions is the App's manifest's, row for row.
func TestREADMEAppPermissions(t *testing.T) {
	var m struct {
		Permissions map[string]string `json:"default_permissions"`
	}
	b, err := os.ReadFile("../deploy/app/app-manifest.json")
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("app-manifest.json: %v", err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range regexp.MustCompile(`(?m)^\| (Pull requests|Issues|Deployments|Checks|Metadata|Contents) \| ([a-z ]+) \|`).FindAllStringSubmatch(string(readme), -1) {
		access := row[2]
		if strings.Contains(access, "write") {
			access = "write"
		}
		got[strings.ReplaceAll(strings.ToLower(row[1]), " ", "_")] = access
	}
	if !maps.Equal(got, m.Permissions) {
		t.Errorf("README's App permissions %v, the manifest's %v", got, m.Permissions)
	}
}
