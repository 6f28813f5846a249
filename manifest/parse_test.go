package manifest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/antifailure/af/failure"
)

const base = `name: shop
runtime:
  provider: kubernetes
services:
  web:
    image: shop/web:1
    port: 8080
`

// with returns the base manifest with extra YAML appended under services.web (indent 4) or at
// the top level.
func withWeb(extra string) string { return base + extra }

func TestParseRejectsInvalid(t *testing.T) {
	cases := []struct {
		name     string
		doc      string
		wantPath string
		wantCode failure.Code
		wantMsg  string
	}{
		{"empty document", "", "", "AF-RUN-011", "empty"},
		{"not YAML", "name: [unclosed", "", "AF-RUN-011", "not valid YAML"},
		{"a list, not a mapping", "- a\n- b\n", "", "AF-RUN-011", "mapping"},
		{"duplicate key", base + "name: again\n", "", "AF-RUN-011", "not valid YAML"},
		{"unknown top-level field", base + "servises: {}\n", "servises", "AF-RUN-011", `did you mean "services"`},
		{"unknown service field", withWeb("    healthpath: /h\n"), "services.web.healthpath", "AF-RUN-011", `did you mean "health_path"`},
		{"missing name", strings.Replace(base, "name: shop\n", "", 1), "name", "AF-RUN-011", "is required"},
		{"name not a label", strings.Replace(base, "name: shop", "name: Shop_App", 1), "name", "AF-RUN-011", "DNS label"},
		{"name is a number", strings.Replace(base, "name: shop", "name: 42", 1), "name", "AF-RUN-011", "expected a string"},
		{"missing runtime", "name: shop\nservices:\n  web:\n    image: a:1\n    port: 1\n", "runtime", "AF-RUN-011", "is required"},
		{"unknown provider", strings.Replace(base, "provider: kubernetes", "provider: kubernets", 1), "runtime.provider", "AF-RUN-011", `did you mean "kubernetes"`},
		{"bad namespace prefix", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  namespace_prefix: Env_", 1), "runtime.namespace_prefix", "AF-RUN-011", "namespace prefix"},
		{"long namespace prefix", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  namespace_prefix: abcdefghijklmnopqrstuvwxyz-", 1), "runtime.namespace_prefix", "AF-RUN-011", "at most 20"},
		{"bad domain", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  domain: https://x.dev", 1), "runtime.domain", "AF-RUN-011", "not a DNS domain"},
		{"bad registry", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  registry: previews", 1), "runtime.registry", "AF-RUN-011", "repository prefix"},
		{"ttl not a duration", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  ttl: forever", 1), "runtime.ttl", "AF-RUN-011", "not a duration"},
		{"ttl too short", strings.Replace(base, "provider: kubernetes", "provider: kubernetes\n  ttl: 1m", 1), "runtime.ttl", "AF-RUN-011", "out of range"},
		{"no services", "name: shop\nruntime:\n  provider: kubernetes\nservices: {}\n", "services", "AF-RUN-011", "at least one"},
		{"service name not a label", strings.Replace(base, "  web:", "  Web_1:", 1), "services.Web_1", "AF-RUN-011", "not a service name"},
		{"reserved service name", strings.Replace(base, "  web:", "  af-sidecar:", 1), "services.af-sidecar", "AF-RUN-011", "reserves"},
		{"port out of range", strings.Replace(base, "port: 8080", "port: 70000", 1), "services.web.port", "AF-RUN-011", "70000 is not a port"},
		{"port not a number", strings.Replace(base, "port: 8080", "port: http", 1), "services.web.port", "AF-RUN-011", "whole number"},
		{"web without port", strings.Replace(base, "    port: 8080\n", "    kind: web\n", 1), "services.web.port", "AF-RUN-011", "required for a web service"},
		{"unknown kind", withWeb("    kind: daemon\n"), "services.web.kind", "AF-RUN-011", "not one of web, worker, cron"},
		{"image and build", withWeb("    build:\n      context: .\n"), "services.web.image", "AF-RUN-011", "together with build"},
		{"neither image nor build", strings.Replace(base, "    image: shop/web:1\n", "", 1), "services.web", "AF-RUN-011", "neither image nor build"},
		{"bad image", strings.Replace(base, "image: shop/web:1", "image: Shop/Web:1", 1), "services.web.image", "AF-RUN-011", "not an image reference"},
		{"build context outside repo", strings.Replace(base, "    image: shop/web:1\n", "    build:\n      context: ../other\n", 1), "services.web.build.context", "AF-RUN-011", "leaves the repository"},
		{"build context absolute", strings.Replace(base, "    image: shop/web:1\n", "    build:\n      context: /src\n", 1), "services.web.build.context", "AF-RUN-011", "absolute"},
		{"build without context", strings.Replace(base, "    image: shop/web:1\n", "    build:\n      dockerfile: Dockerfile\n", 1), "services.web.build.context", "AF-RUN-011", "is required"},
		{"health path without slash", withWeb("    health_path: healthz\n"), "services.web.health_path", "AF-RUN-011", "not an HTTP path"},
		{"health path without port", strings.Replace(base, "    port: 8080\n", "    kind: worker\n    health_path: /h\n", 1), "services.web.health_path", "AF-RUN-011", "port is not"},
		{"replicas zero", withWeb("    replicas: 0\n"), "services.web.replicas", "AF-RUN-011", "out of range"},
		{"replicas unbounded", withWeb("    replicas: 500\n"), "services.web.replicas", "AF-RUN-011", "out of range (1 to 20)"},
		{"cpu not a quantity", withWeb("    resources:\n      cpu: lots\n"), "services.web.resources.cpu", "AF-RUN-011", "not a Kubernetes quantity"},
		{"cpu finer than 1m", withWeb("    resources:\n      cpu: \"1.0005\"\n"), "services.web.resources.cpu", "AF-RUN-011", "finer than 1m"},
		{"memory too small", withWeb("    resources:\n      memory: 1Ki\n"), "services.web.resources.memory", "AF-RUN-011", "out of range"},
		{"memory below the gate's", withWeb("    resources:\n      memory: 8Mi\n"), "services.web.resources.memory", "AF-RUN-011", "8Mi is out of range (16Mi to 256Gi; af's gate"},
		{"ceiling below the gate's", base + "limits:\n  memory: 15Mi\n", "limits.memory", "AF-RUN-011", "15Mi is out of range (16Mi to 256Gi"},
		{"unknown resource", withWeb("    resources:\n      gpu: 1\n"), "services.web.resources.gpu", "AF-RUN-011", "unknown field"},
		{"schedule on a web service", withWeb("    schedule: \"@daily\"\n"), "services.web.schedule", "AF-RUN-011", "only read for kind cron"},
		{"cron without schedule", base + "  job:\n    kind: cron\n    image: job:1\n", "services.job.schedule", "AF-RUN-011", "required for a cron service"},
		{"cron bad schedule", base + "  job:\n    kind: cron\n    image: job:1\n    schedule: \"61 * * * *\"\n", "services.job.schedule", "AF-RUN-011", "minute field"},
		{"cron with replicas", base + "  job:\n    kind: cron\n    image: job:1\n    schedule: \"@hourly\"\n    replicas: 2\n", "services.job.replicas", "AF-RUN-011", "one instance"},
		{"env boolean", withWeb("    env:\n      DEBUG: yes\n"), "services.web.env.DEBUG", "AF-RUN-011", "quote the value"},
		{"env bad name", withWeb("    env:\n      1BAD: x\n"), "services.web.env.1BAD", "AF-RUN-011", "not an environment variable name"},
		{"env proxy variable", withWeb("    env:\n      https_proxy: http://x:1\n"), "services.web.env.https_proxy", "AF-RUN-011", "set by af"},
		{"command empty list", withWeb("    command: []\n"), "services.web.command", "AF-RUN-011", "empty list"},
		{"command of numbers", withWeb("    command: [1, 2]\n"), "services.web.command[0]", "AF-RUN-011", "every element"},
		{"missing dependency", withWeb("    depends_on: [api]\n"), "services.web.depends_on[0]", "AF-RUN-042", "not a service"},
		{"self dependency", withWeb("    depends_on: [web]\n"), "services.web.depends_on[0]", "AF-RUN-041", "depends on itself"},
		{"dependency cycle", withWeb("    depends_on: [api]\n") + "  api:\n    image: api:1\n    depends_on: [db]\n  db:\n    image: db:1\n    depends_on: [web]\n", "services.api.depends_on[0]", "AF-RUN-041", "api -> db -> web -> api"},
		{"migrate_after without migrate", withWeb("    migrate_after: [api]\n") + "  api:\n    image: api:1\n", "services.web.migrate_after", "AF-RUN-011", "has no migrate"},
		{"migrate_after missing", withWeb("    migrate: [m]\n    migrate_after: [apu]\n") + "  api:\n    image: api:1\n", "services.web.migrate_after[0]", "AF-RUN-042", "did you mean \"api\""},
		{"migrate_after itself", withWeb("    migrate: [m]\n    migrate_after: [web]\n"), "services.web.migrate_after[0]", "AF-RUN-041", "cannot wait for"},
		{"migrate_after cycle", withWeb("    migrate: [m]\n    migrate_after: [api]\n") + "  api:\n    image: api:1\n    depends_on: [web]\n", "services.api.depends_on[0]", "AF-RUN-041", "api -> web -> api"},
		{"database unknown provider", base + "database:\n  provider: sqlite\n", "database.provider", "AF-RUN-011", "not one of container, url"},
		{"database url without url_from", base + "database:\n  provider: url\n", "database.url_from", "AF-RUN-011", "required with provider url"},
		{"database url with engine", base + "database:\n  provider: url\n  url_from: DB\n  engine: postgres\n", "database.engine", "AF-RUN-011", "only read with provider container"},
		{"database env clash", withWeb("    env:\n      DATABASE_URL: x\n") + "database:\n  provider: url\n  url_from: DB\n", "services.web.env.DATABASE_URL", "AF-RUN-011", "database URL"},
		{"egress default unknown", base + "egress:\n  default: deny\n", "egress.default", "AF-RUN-011", "not one of block, allow, capture"},
		{"egress lone star", base + "egress:\n  rules:\n    - host: \"*\"\n", "egress.rules[0].host", "AF-RUN-011", "alone is not a rule"},
		{"egress partial star", base + "egress:\n  rules:\n    - host: \"api*.x.com\"\n", "egress.rules[0].host", "AF-RUN-011", "whole label"},
		{"egress too broad", base + "egress:\n  rules:\n    - host: \"*.com\"\n", "egress.rules[0].host", "AF-RUN-011", "too broad"},
		{"egress URL as host", base + "egress:\n  rules:\n    - host: https://api.x.com/v1\n", "egress.rules[0].host", "AF-RUN-011", "without scheme"},
		{"egress IP as host", base + "egress:\n  rules:\n    - host: 10.0.0.1\n", "egress.rules[0].host", "AF-RUN-011", "IP address"},
		{"egress bad port", base + "egress:\n  rules:\n    - host: api.x.com\n      ports: [0]\n", "egress.rules[0].ports[0]", "AF-RUN-011", "not a port"},
		{"egress bad mode", base + "egress:\n  rules:\n    - host: api.x.com\n      mode: deny\n", "egress.rules[0].mode", "AF-RUN-011", "not one of allow, block, capture"},
		{"egress rule without host", base + "egress:\n  rules:\n    - mode: allow\n", "egress.rules[0].host", "AF-RUN-011", "is required (or cidr)"},
		{"egress host and cidr", base + "egress:\n  rules:\n    - host: db.x.com\n      cidr: 10.1.0.0/16\n", "egress.rules[0].cidr", "AF-RUN-011", "together with host"},
		{"egress cidr metadata", base + "egress:\n  rules:\n    - cidr: 169.254.0.0/16\n", "egress.rules[0].cidr", "AF-RUN-011", "never reach"},
		{"egress cidr too broad", base + "egress:\n  rules:\n    - cidr: 0.0.0.0/0\n", "egress.rules[0].cidr", "AF-RUN-011", "broader than a /8"},
		{"egress cidr not a range", base + "egress:\n  rules:\n    - cidr: 10.1.2.3\n", "egress.rules[0].cidr", "AF-RUN-011", "not an address range"},
		{"egress duplicate rule", base + "egress:\n  rules:\n    - host: api.x.com\n    - host: API.x.com\n      mode: block\n", "egress.rules[1]", "AF-RUN-011", "repeats egress.rules[0]"},
		{"github not boolean", base + "github:\n  comment: sometimes\n", "github.comment", "AF-RUN-011", "true or false"},
		{"github fork policy", base + "github:\n  fork_policy: trusted\n", "github.fork_policy", "AF-RUN-011", "not one of label, never, always"},
		{"github label too long", base + "github:\n  label: " + strings.Repeat("x", 51) + "\n", "github.label", "AF-RUN-011", "at most 50"},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Parse([]byte(c.doc))
			if r.Valid() {
				t.Fatalf("accepted:\n%s", c.doc)
			}
			var found *Problem
			for i, p := range r.Problems {
				if p.Path == c.wantPath {
					found = &r.Problems[i]
					break
				}
			}
			if found == nil {
				t.Fatalf("no problem at %q; got %v", c.wantPath, r.Problems)
			}
			if found.Code != c.wantCode {
				t.Errorf("code %s, want %s (%v)", found.Code, c.wantCode, found)
			}
			if !strings.Contains(found.Message, c.wantMsg) {
				t.Errorf("message %q does not say %q", found.Message, c.wantMsg)
			}
			if len(r.Problems) != 1 {
				t.Errorf("want exactly the one problem, got %d: %v", len(r.Problems), r.Problems)
			}
			err := r.Err("af.yaml")
			if failure.CodeOf(err) != c.wantCode {
				t.Errorf("Err code = %s, want %s", failure.CodeOf(err), c.wantCode)
			}
			var inv *Invalid
			if !errors.As(err, &inv) || len(inv.Problems) != len(r.Problems) {
				t.Errorf("Err does not carry the problems: %v", err)
			}
		})
	}
}

func TestParseReportsEveryProblemWithLines(t *testing.T) {
	doc := `name: Bad_Name
runtime:
  provider: kubernets
  bogus: 1
services:
  web:
    image: shop/web:1
    port: 0
    depends_on: [nope]
egress:
  rules:
    - host: "*"
`
	r := Parse([]byte(doc))
	want := map[string]int{
		"name":                       1,
		"runtime.provider":           3,
		"runtime.bogus":              4,
		"services.web.port":          8,
		"services.web.depends_on[0]": 9,
		"egress.rules[0].host":       12,
	}
	got := map[string]int{}
	for _, p := range r.Problems {
		got[p.Path] = p.Line
	}
	for path, line := range want {
		if got[path] != line {
			t.Errorf("%s: line %d, want %d (all: %v)", path, got[path], line, r.Problems)
		}
	}
	if len(r.Problems) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(r.Problems), len(want), r.Problems)
	}
	// Mixed codes make the overall failure AF-RUN-011, and each line names its own code.
	err := r.Err("af.yaml")
	if !errors.Is(err, failure.ManifestInvalid) || !strings.Contains(err.Error(), "[AF-RUN-042]") {
		t.Errorf("Err = %v", err)
	}
}

func TestParseOnlyDependencyProblemsKeepTheirCode(t *testing.T) {
	r := Parse([]byte(withWeb("    depends_on: [missing]\n")))
	if err := r.Err("af.yaml"); !errors.Is(err, failure.DependencyMissing) || failure.As(err).Exit() != failure.ExitInput {
		t.Fatalf("Err = %v", err)
	}
}

func validFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/valid/*")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, "../examples/shop/af.yaml")
}

func TestParseAcceptsValidExamples(t *testing.T) {
	for _, f := range validFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := Parse(data)
		if !r.Valid() {
			t.Errorf("%s: %v", f, r.Problems)
		}
		if len(r.Warnings) > 0 {
			t.Errorf("%s: warnings %v", f, r.Warnings)
		}
	}
}

func TestDefaults(t *testing.T) {
	r := Parse([]byte(base))
	if !r.Valid() {
		t.Fatal(r.Problems)
	}
	m := r.Manifest
	web := m.Services["web"]
	checks := map[string][2]any{
		"namespace_prefix": {m.Runtime.NamespacePrefix, "af-env-"},
		"ttl":              {string(m.Runtime.TTL), "72h"},
		"kind":             {web.Kind, "web"},
		"replicas":         {web.Replicas, 1},
		"egress.default":   {m.Egress.Default, "block"},
		"fork_policy":      {m.GitHub.ForkPolicy, "label"},
		"label":            {m.GitHub.Label, "af-preview"},
		"comment":          {*m.GitHub.Comment, true},
		"check":            {*m.GitHub.Check, true},
		"deployment":       {*m.GitHub.Deployment, true},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	// A worker is the inferred kind without a port; a build gets the default Dockerfile.
	r = Parse([]byte("name: a\nruntime: {provider: kubernetes}\nservices:\n  w:\n    build: {context: .}\n"))
	if !r.Valid() || r.Manifest.Services["w"].Kind != KindWorker || r.Manifest.Services["w"].Build.Dockerfile != "Dockerfile" {
		t.Fatalf("%v %+v", r.Problems, r.Manifest.Services["w"])
	}
	// Explicit false is kept, not overwritten by the default true.
	r = Parse([]byte(base + "github:\n  comment: false\n"))
	if *r.Manifest.GitHub.Comment {
		t.Fatal("comment: false was overwritten")
	}
}

func TestWarnings(t *testing.T) {
	r := Parse([]byte(strings.Replace(base, "image: shop/web:1", "image: shop/web", 1) + "github:\n  fork_policy: never\n  label: x\n"))
	if !r.Valid() {
		t.Fatal(r.Problems)
	}
	paths := map[string]bool{}
	for _, w := range r.Warnings {
		paths[w.Path] = true
	}
	if !paths["services.web.image"] || !paths["github.label"] || len(r.Warnings) != 2 {
		t.Fatalf("warnings = %v", r.Warnings)
	}
}

func TestCIDRRuleOverClusterRangesWarns(t *testing.T) {
	for _, c := range []struct {
		cidr string
		warn bool
	}{
		{"10.0.0.0/8", true},     // holds every 10/8 cluster range
		{"10.244.0.0/16", true},  // flannel's and kind's pods
		{"10.100.0.0/16", true},  // inside kubeadm's Services
		{"192.168.4.0/24", true}, // inside Calico's default pool
		{"10.20.0.0/16", false},  // a database's own range
		{"198.51.100.0/24", false},
	} {
		r := Parse([]byte(base + "egress:\n  rules:\n    - cidr: " + c.cidr + "\n      mode: allow\n      ports: [5432]\n"))
		if !r.Valid() {
			t.Fatalf("%s: %v", c.cidr, r.Problems)
		}
		got := len(r.Warnings) == 1 && r.Warnings[0].Path == "egress.rules[0].cidr" && strings.Contains(r.Warnings[0].Message, "never lets the sidecar into the cluster")
		if got != c.warn || (!c.warn && len(r.Warnings) > 0) {
			t.Errorf("cidr %s: want warning %v, got %v", c.cidr, c.warn, r.Warnings)
		}
	}
}

func TestCommandForms(t *testing.T) {
	r := Parse([]byte(withWeb("    command: ./web --port 8080\n    migrate: [\"/web\", \"migrate\"]\n")))
	if !r.Valid() {
		t.Fatal(r.Problems)
	}
	web := r.Manifest.Services["web"]
	if got := web.Command.Argv(); strings.Join(got, "|") != "/bin/sh|-c|./web --port 8080" {
		t.Errorf("shell form argv = %q", got)
	}
	if got := web.Migrate.Argv(); strings.Join(got, "|") != "/web|migrate" {
		t.Errorf("exec form argv = %q", got)
	}
	// The forms survive a round trip through JSON, as af validate -o json prints them.
	b, err := json.Marshal(web)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"command":"./web --port 8080"`) || !strings.Contains(string(b), `"migrate":["/web","migrate"]`) {
		t.Errorf("JSON = %s", b)
	}
}

func TestStartOrder(t *testing.T) {
	r := Parse([]byte(`name: a
runtime: {provider: kubernetes}
services:
  web: {image: w:1, port: 80, depends_on: [api, cache]}
  api: {image: a:1, depends_on: [db]}
  db: {image: d:1}
  cache: {image: c:1}
  admin: {image: x:1, port: 81, depends_on: [db]}
`))
	if !r.Valid() {
		t.Fatal(r.Problems)
	}
	got := strings.Join(StartOrder(r.Manifest.Services), ",")
	if got != "cache,db,admin,api,web" {
		t.Fatalf("order = %s", got)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), nil); !errors.Is(err, failure.ManifestUnreadable) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := Load(t.TempDir(), nil); !errors.Is(err, failure.ManifestUnreadable) {
		t.Errorf("directory: %v", err)
	}
	r, err := Load("-", strings.NewReader(base))
	if err != nil || !r.Valid() {
		t.Errorf("stdin: %v %v", err, r)
	}
	big := base + "#" + strings.Repeat("x", MaxSize) + "\n"
	if r := Parse([]byte(big)); r.Valid() || !strings.Contains(r.Problems[0].Message, "at most") {
		t.Errorf("oversized manifest: %v", r.Problems)
	}
}
