package root

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/conformance/verdict"
)

type result struct {
	code   int
	out    string
	errOut string
}

func run(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	ios, in, out, errOut := iostreams.Test()
	in.WriteString(stdin)
	f := factory.New(ios, func(k string) string { return env[k] })
	code := Main(context.Background(), f, args)
	return result{code, out.String(), errOut.String()}
}

// valid is the manifest every command test starts from.
const valid = cmdtest.Manifest

func writeManifest(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "af.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHelpListsCommands(t *testing.T) {
	r := run(t, nil, "", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	for _, c := range []string{"validate", "up", "down", "status", "net", "inbox", "webhook", "probe", "version", "app", "reap"} {
		if !strings.Contains(r.out, "\n  "+c+" ") {
			t.Errorf("--help does not list %s:\n%s", c, r.out)
		}
	}
	for _, hidden := range []string{"sidecar", "gate ", "action"} {
		if strings.Contains(r.out, "\n  "+hidden) {
			t.Errorf("--help lists hidden %s", hidden)
		}
	}
	sub := run(t, nil, "", "net", "--help")
	if !strings.Contains(sub.out, "log") {
		t.Errorf("af net --help: %s", sub.out)
	}
}

// TestAppServeRefusesWithoutCredentials: the App does not start, and listens on nothing,
// without its id and key or without a webhook secret.
func TestAppServeRefusesWithoutCredentials(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"AF_APP_WEBHOOK_SECRET": "s"}, "needs the App's id and private key"},
		{map[string]string{"AF_APP_ID": "12", "AF_APP_PRIVATE_KEY_FILE": key, "AF_APP_WEBHOOK_SECRET": "s"}, "not PEM"},
		{map[string]string{"AF_APP_ID": "twelve"}, "AF_APP_ID=\"twelve\""},
		{map[string]string{"AF_APP_ID": "12", "AF_APP_PRIVATE_KEY_FILE": filepath.Join(t.TempDir(), "missing.pem")}, "reading the App's private key"},
	} {
		r := run(t, c.env, "", "app", "serve")
		if r.code == 0 || !strings.Contains(r.errOut, "AF-GH-007") || !strings.Contains(r.errOut, c.want) {
			t.Errorf("%v: exit %d\n%s", c.env, r.code, r.errOut)
		}
	}
}

func TestValidate(t *testing.T) {
	path := writeManifest(t, valid)
	r := run(t, nil, "", "validate", "-f", path)
	if r.code != 0 || !strings.Contains(r.out, "valid") || !strings.Contains(r.out, "api (worker x2), web (web)") {
		t.Fatalf("exit %d\nout: %s\nerr: %s", r.code, r.out, r.errOut)
	}
	if strings.Contains(r.out, "\x1b[") {
		t.Error("colour written to a non-terminal")
	}

	q := run(t, nil, "", "validate", "-q", "-f", path)
	if q.code != 0 || q.out != "" || q.errOut != "" {
		t.Errorf("-q printed %q %q", q.out, q.errOut)
	}

	j := run(t, nil, "", "validate", "-o", "json", "-f", path)
	var res struct {
		Valid    bool
		Problems []any
		Manifest struct {
			Runtime struct {
				NamespacePrefix string `json:"namespace_prefix"`
			}
			Services map[string]struct{ Kind string }
		}
	}
	if err := json.Unmarshal([]byte(j.out), &res); err != nil || j.code != 0 {
		t.Fatalf("exit %d, %v: %s", j.code, err, j.out)
	}
	if !res.Valid || len(res.Problems) != 0 || res.Manifest.Runtime.NamespacePrefix != "af-env-" || res.Manifest.Services["api"].Kind != "worker" {
		t.Errorf("json = %s", j.out)
	}

	stdin := run(t, nil, valid, "validate", "-f", "-")
	if stdin.code != 0 {
		t.Errorf("stdin: exit %d %s", stdin.code, stdin.errOut)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	path := writeManifest(t, strings.Replace(strings.Replace(valid, "port: 8080", "port: 70000", 1), "[api]", "[apii]", 1))
	r := run(t, nil, "", "validate", "-f", path)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2", r.code)
	}
	for _, want := range []string{"Error AF-RUN-011: manifest is not valid", "services.web.port (line 7): 70000 is not a port", `services.web.depends_on[0] (line 8): "apii" is not a service of this manifest; did you mean "api"? [AF-RUN-042]`, "what to do:"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("missing %q in:\n%s", want, r.errOut)
		}
	}
	j := run(t, nil, "", "validate", "-f", path, "-o", "json")
	var res struct {
		Valid    bool
		Problems []struct{ Path, Code string }
		Error    struct {
			Code string
			Exit int
		}
	}
	if err := json.Unmarshal([]byte(j.out), &res); err != nil {
		t.Fatalf("%v: %s", err, j.out)
	}
	if j.code != 2 || res.Valid || len(res.Problems) != 2 || res.Error.Code != "AF-RUN-011" || res.Error.Exit != 2 || j.errOut != "" {
		t.Errorf("exit %d json %s stderr %q", j.code, j.out, j.errOut)
	}
	if res.Problems[0].Path != "services.web.port" || res.Problems[1].Code != "AF-RUN-042" {
		t.Errorf("problems = %+v", res.Problems)
	}
}

func TestValidateUnreadable(t *testing.T) {
	r := run(t, nil, "", "validate", "-f", filepath.Join(t.TempDir(), "nope.yaml"))
	if r.code != 2 || !strings.Contains(r.errOut, "AF-RUN-010") {
		t.Errorf("exit %d: %s", r.code, r.errOut)
	}
	j := run(t, nil, "", "validate", "-o", "json", "-f", filepath.Join(t.TempDir(), "nope.yaml"))
	var e struct{ Error struct{ Code string } }
	if err := json.Unmarshal([]byte(j.out), &e); err != nil || e.Error.Code != "AF-RUN-010" {
		t.Errorf("json: %v %s", err, j.out)
	}
}

func TestRuntimeCommandsWithoutCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+addr+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: nowhere, context: {cluster: c, user: u}}]
current-context: nowhere
`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A container daemon that is not there: services built from source fail before any cluster
	// call.
	env := map[string]string{"KUBECONFIG": kubeconfig, "DOCKER_HOST": "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")}
	path := writeManifest(t, valid)
	for _, args := range [][]string{{"up"}, {"down"}, {"status"}, {"up", "--pr", "7", "--repo", "acme/shop"}} {
		r := run(t, env, "", append(args, "-f", path)...)
		if r.code != 1 || !strings.Contains(r.errOut, "AF-RUN-002") || !strings.Contains(r.errOut, `using kubeconfig context "nowhere"`) {
			t.Errorf("af %v: exit %d\n%s", args, r.code, r.errOut)
		}
	}
	j := run(t, env, "", "status", "-f", path, "-o", "json")
	var e struct{ Error struct{ Code string } }
	if err := json.Unmarshal([]byte(j.out), &e); err != nil || e.Error.Code != "AF-RUN-002" || j.code != 1 {
		t.Errorf("status -o json: %v %s", err, j.out)
	}
	half := map[string]string{"KUBECONFIG": kubeconfig, "AF_REGISTRY_USERNAME": "previews"}
	if r := run(t, half, "", "up", "-f", path); r.code != 2 || !strings.Contains(r.errOut, "AF_REGISTRY_USERNAME and AF_REGISTRY_PASSWORD go together") {
		t.Errorf("half the registry credentials: exit %d %s", r.code, r.errOut)
	}
	if r := run(t, env, "", "up", "-f", path, "--context", "elsewhere"); r.code != 1 || !strings.Contains(r.errOut, `context "elsewhere" (from --context) is not in the kubeconfig`) {
		t.Errorf("unknown context: exit %d %s", r.code, r.errOut)
	}

	for _, c := range []struct {
		name     string
		manifest string
		args     []string
		code     int
		want     string
	}{
		{"env and pr", valid, []string{"up", "--env", "a", "--pr", "3"}, 2, "AF-RUN-003"},
		{"pr without repo", valid, []string{"down", "--pr", "3"}, 2, "AF-RUN-003"},
		{"env not a label", valid, []string{"status", "--env", "Not_A_Label"}, 2, "AF-RUN-012"},
		{"image syntax", valid, []string{"up", "--image", "web"}, 2, "AF-RUN-003"},
		{"local runtime", strings.Replace(valid, "provider: kubernetes", "provider: local", 1), []string{"up"}, 1, "AF-RUN-001"},
		{"container database", valid + "database: {provider: container}\n", []string{"up"}, 3, "AF-RUN-044"},
		{"built, no daemon", strings.Replace(valid, "image: shop/web:1.0", "build: {context: .}", 1), []string{"up"}, 1, "AF-RUN-008"},
		{"image for unknown service", valid, []string{"up", "--image", "db=x:1"}, 2, "AF-RUN-003"},
	} {
		r := run(t, env, "", append(c.args, "-f", writeManifest(t, c.manifest))...)
		if r.code != c.code || !strings.Contains(r.errOut, c.want) || strings.Contains(r.errOut, "AF-RUN-002") {
			t.Errorf("%s: exit %d, want %d and %s\n%s", c.name, r.code, c.code, c.want, r.errOut)
		}
	}
}

// words returns the command words of args, without flags and their values.
func words(args []string) []string {
	var w []string
	for i := 0; i < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			i++ // every flag used here takes a value but --wait, which is last
			continue
		}
		w = append(w, args[i])
	}
	return w
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"validate", "--bogus"}, {"validate", "extra"}, {"-o", "yaml", "version"}, {"net", "bogus"}} {
		r := run(t, nil, "", args...)
		if r.code != 2 || !strings.Contains(r.errOut, "AF-RUN-003") {
			t.Errorf("af %v: exit %d %q", args, r.code, r.errOut)
		}
	}
	j := run(t, nil, "", "bogus", "-o", "json")
	if !strings.Contains(j.out, `"AF-RUN-003"`) {
		t.Errorf("json usage error: %q %q", j.out, j.errOut)
	}
}

func TestVersion(t *testing.T) {
	r := run(t, nil, "", "version")
	if r.code != 0 || !strings.HasPrefix(r.out, "af ") {
		t.Errorf("version: %d %q", r.code, r.out)
	}
	j := run(t, nil, "", "version", "-o", "json")
	var v struct{ Version, Commit, GoVersion, Platform string }
	if err := json.Unmarshal([]byte(j.out), &v); err != nil || v.Version == "" || v.Platform == "" {
		t.Errorf("version json: %v %s", err, j.out)
	}
}

func TestColour(t *testing.T) {
	ios, _, _, errOut := iostreams.Test()
	ios.SetColor(true)
	f := factory.New(ios, func(string) string { return "" })
	f.Options.File = filepath.Join(t.TempDir(), "missing.yaml")
	Main(context.Background(), f, []string{"validate", "-f", f.Options.File})
	if !strings.Contains(errOut.String(), "\x1b[31mError AF-RUN-010") {
		t.Errorf("no colour when enabled: %q", errOut.String())
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"NO_COLOR": "1"}, nil},
		{nil, []string{"--no-color"}},
	} {
		ios, _, _, errOut := iostreams.Test()
		ios.SetColor(true)
		f := factory.New(ios, func(k string) string { return tc.env[k] })
		Main(context.Background(), f, append([]string{"validate", "-f", filepath.Join(t.TempDir(), "missing.yaml")}, tc.args...))
		if strings.Contains(errOut.String(), "\x1b[") {
			t.Errorf("colour despite %v %v: %q", tc.env, tc.args, errOut.String())
		}
	}
}

func TestSidecarCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yaml", "environment: e\nnamespace: n\ncluster_resolver: nowhere\nadvertise_ipv4: x\nbogus: 1\n")
	if r := run(t, nil, "", "sidecar", "--config", bad); r.code != 2 || !strings.Contains(r.errOut, "AF-RUN-050") || !strings.Contains(r.errOut, "bogus") {
		t.Errorf("bad config: %d %s", r.code, r.errOut)
	}
	bad2 := write("bad2.yaml", "environment: e\nnamespace: n\ncluster_resolver: nowhere\nadvertise_ipv4: x\n")
	if r := run(t, nil, "", "sidecar", "--config", bad2); r.code != 2 || !strings.Contains(r.errOut, "advertise_ipv4") || !strings.Contains(r.errOut, "cluster_resolver") {
		t.Errorf("invalid config: %d %s", r.code, r.errOut)
	}
	if r := run(t, nil, "", "sidecar"); r.code != 2 || !strings.Contains(r.errOut, "AF-RUN-003") {
		t.Errorf("no --config: %d %s", r.code, r.errOut)
	}
	good := write("good.yaml", `environment: shop-pr-1
namespace: af-env-shop-pr-1
cluster_resolver: 127.0.0.1:1
advertise_ipv4: 198.18.3.3
listen: {proxy: "127.0.0.1:0", dns: "127.0.0.1:0", control: "127.0.0.1:0"}
`)
	ios, _, _, errOut := iostreams.Test()
	f := factory.New(ios, func(string) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if code := Main(ctx, f, []string{"sidecar", "--config", good, "--grace", "1s"}); code != 0 || !strings.Contains(errOut.String(), "serving environment shop-pr-1") {
		t.Errorf("run: %d %s", code, errOut.String())
	}
	// A port already taken: AF-RUN-051 naming the address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := write("taken.yaml", "environment: e\nnamespace: n\ncluster_resolver: 127.0.0.1:1\nadvertise_ipv4: 198.18.3.3\nlisten: {proxy: \""+ln.Addr().String()+"\", control: \"127.0.0.1:0\"}\n")
	if r := run(t, nil, "", "sidecar", "--config", taken); r.code != 1 || !strings.Contains(r.errOut, "AF-RUN-051") || !strings.Contains(r.errOut, ln.Addr().String()) {
		t.Errorf("taken port: %d %s", r.code, r.errOut)
	}
}

func TestConformanceVerify(t *testing.T) {
	const pkg = "github.com/antifailure/af/runtime/kubernetes"
	var b strings.Builder
	ev := func(action, test string) {
		fmt.Fprintf(&b, `{"Action":%q,"Package":%q,"Test":%q}`+"\n", action, pkg, test)
	}
	for _, bh := range verdict.Roster {
		ev("run", verdict.RootTest+"/"+bh.Name)
		ev("pass", verdict.RootTest+"/"+bh.Name)
	}
	ev("pass", verdict.RootTest)
	ev("pass", verdict.StartupProof)
	fmt.Fprintf(&b, `{"Action":"pass","Package":%q}`+"\n", pkg)
	good := filepath.Join(t.TempDir(), "report.jsonl")
	if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "", "conformance", "verify", good)
	want := fmt.Sprintf("%d behaviours passed, 0 skipped, startup proof passed\n", len(verdict.Roster))
	if r.code != 0 || r.out != want {
		t.Errorf("verify: exit %d %q %s", r.code, r.out, r.errOut)
	}
	bad := strings.Replace(b.String(), `{"Action":"pass","Package":"`+pkg+`","Test":"`+verdict.RootTest+`/egress/no-metadata"}`, `{"Action":"skip","Package":"`+pkg+`","Test":"`+verdict.RootTest+`/egress/no-metadata"}`, 1)
	r = run(t, nil, bad, "conformance", "verify", "-")
	if r.code != 1 || !strings.Contains(r.errOut, "AF-RUN-049") || !strings.Contains(r.errOut, "containment behaviour egress/no-metadata was skipped") {
		t.Errorf("verify of a skipped containment behaviour: exit %d %s", r.code, r.errOut)
	}
	j := run(t, nil, bad, "conformance", "verify", "-", "-o", "json")
	if j.code != 1 || !strings.Contains(j.out, `"accepted": false`) {
		t.Errorf("verify -o json: exit %d %s", j.code, j.out)
	}
}

func TestConformanceRoster(t *testing.T) {
	r := run(t, nil, "", "conformance", "roster", "--containment")
	var want []string
	for _, b := range verdict.Roster {
		if b.Containment {
			want = append(want, b.Name)
		}
	}
	if r.code != 0 || r.out != strings.Join(want, "\n")+"\n" || len(want) != 12 {
		t.Errorf("roster --containment: exit %d %q", r.code, r.out)
	}
	j := run(t, nil, "", "conformance", "roster", "-o", "json")
	if j.code != 0 || strings.Count(j.out, `"name"`) != len(verdict.Roster) || !strings.Contains(j.out, `"requires": "ingress"`) {
		t.Errorf("roster -o json: exit %d %s", j.code, j.out)
	}
}

// The commands that read what an environment saw report a bad manifest first.
func TestObserveCommandsReadTheManifestFirst(t *testing.T) {
	bad := writeManifest(t, "name: x\n")
	for _, args := range [][]string{{"net", "log"}, {"inbox", "list"}, {"logs", "web"}, {"webhook", "trigger", "--to", "web/hook", "--provider", "hmac", "--secret-env", "S"}} {
		r := run(t, map[string]string{"S": "secret"}, "", append(args, "-f", bad)...)
		if r.code != 2 || !strings.Contains(r.errOut, "AF-RUN-011") {
			t.Errorf("af %v with a bad manifest: exit %d %s", args, r.code, r.errOut)
		}
	}
}
