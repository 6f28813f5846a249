package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/failure"
)

func TestParseIngressController(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" for an error
	}{
		{"af-ingress/app.kubernetes.io/name=traefik", "af-ingress map[app.kubernetes.io/name:traefik]"},
		{"ingress-nginx/app=nginx,component=controller", "ingress-nginx map[app:nginx component:controller]"},
		{"ns/app=", "ns map[app:]"},
		{"no-selector", ""},
		{"/app=x", ""},
		{"ns/", ""},
		{"ns/app", ""},
		{"ns/=x", ""},
	} {
		ic, err := ParseIngressController(c.in)
		got := ""
		if err == nil {
			got = fmt.Sprintf("%s %v", ic.Namespace, ic.Labels)
		}
		if got != c.want {
			t.Errorf("%q: got %q (%v), want %q", c.in, got, err, c.want)
		}
	}
}

func TestKubernetesOptions(t *testing.T) {
	env := map[string]string{
		"KUBECONFIG": "/k", "AF_ENGINE_IMAGE": "r/engine:1", "AF_GATE_PUBLIC_TCP": "198.51.100.10:80",
		"AF_GATE_NODE_PORTS": "10250/tcp,30999/udp", "AF_GATE_NODE": "10.0.0.9", "AF_CLUSTER_CIDRS": "10.244.0.0/16, 10.96.0.1/12",
		"AF_URL_SCHEME": "http", "AF_CLUSTER_RESOLVER": "kube-system/coredns",
	}
	o, err := Kubernetes(func(k string) string { return env[k] }, "ctx", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %v %v %s %s", o.Kubeconfig, o.Context, o.EngineImage, o.GateEnv, o.ClusterCIDRs, o.URLScheme, o.Resolver)
	want := "/k ctx r/engine:1 map[AF_GATE_NODE_PORTS:10250/tcp,30999/udp AF_GATE_PUBLIC_TCP:198.51.100.10:80] [10.244.0.0/16 10.96.0.0/12] http kube-system/coredns"
	if got != want {
		t.Errorf("options:\n got %s\nwant %s", got, want)
	}
	if o.PublishEngine != "" {
		t.Errorf("an engine image was named, yet af's own binary would be published: %s", o.PublishEngine)
	}
	// The watch: a duration, 0 to turn it off (negative to the runtime), nothing for its default.
	for v, want := range map[string]time.Duration{"": 0, "30s": 30 * time.Second, "0": -1, "0s": -1} {
		o, err := Kubernetes(func(k string) string { return map[string]string{"AF_WATCH_INTERVAL": v}[k] }, "", nil)
		if err != nil || o.Watch != want {
			t.Errorf("AF_WATCH_INTERVAL=%q: %v, %v; want %v", v, o.Watch, err, want)
		}
	}
	for k, v := range map[string]string{"AF_CLUSTER_CIDRS": "10.0.0.0/33", "AF_URL_SCHEME": "ftp", "AF_REGISTRY_USERNAME": "u", "AF_INGRESS_CONTROLLER": "x",
		"AF_WATCH_INTERVAL": "1s"} {
		bad := map[string]string{k: v}
		if _, err := Kubernetes(func(k string) string { return bad[k] }, "", nil); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: want an error naming it, got %v", k, v, err)
		}
	}
	// A kubeconfig's content where its path goes: refused, its credential not repeated.
	content := "apiVersion: v1\nusers:\n- user: {token: sekrit-token-0123}\n"
	if _, err := Kubernetes(func(k string) string { return map[string]string{"KUBECONFIG": content}[k] }, "", nil); err == nil || !strings.Contains(err.Error(), "KUBECONFIG") || strings.Contains(err.Error(), "sekrit") {
		t.Errorf("KUBECONFIG holding content: %v", err)
	}
	if _, err := Kubernetes(func(k string) string { return map[string]string{"KUBECONFIG": "/a/config:/b/config"}[k] }, "", nil); err != nil {
		t.Errorf("KUBECONFIG as a list of paths: %v", err)
	}
	if _, err := Docker(func(k string) string { return map[string]string{"AF_BUILD_TIMEOUT": "soon"}[k] }, nil); err == nil || !strings.Contains(err.Error(), "AF_BUILD_TIMEOUT") {
		t.Errorf("a bad build timeout: %v", err)
	}
}

// TestEveryVariableIsInTheTable: every AF_ variable the code reads is in Vars (and so in
// docs/settings.md), found by reading the source.
func TestEveryVariableIsInTheTable(t *testing.T) {
	known := map[string]bool{}
	for _, v := range Vars {
		known[v.Name] = true
	}
	read := regexp.MustCompile(`[Gg]etenv\("(AF_[A-Z0-9_]+)"\)`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testcluster" || d.Name() == "examples" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir // the test cluster's own variables are not af's
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range read.FindAllSubmatch(src, -1) {
			if name := string(m[1]); !known[name] && name != "AF_SIDECAR" {
				t.Errorf("%s reads %s, which settings.Vars does not list", path, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The App's settings: what parses, and each bad value refused naming its variable.
func TestApp(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	a, err := App(env("AF_APP_NAMESPACE", "af-system", "AF_APP_WORKERS", "8", "AF_APP_REAP_INTERVAL", "2m", "GITHUB_TOKEN", "t"))
	if err != nil || a.Namespace != "af-system" || a.Workers != 8 || a.ReapInterval.String() != "2m0s" || a.Token != "t" || a.Listen != ":8080" {
		t.Fatalf("%+v, %v", a, err)
	}
	if a, err := App(env()); err != nil || a.Namespace != "" || a.Workers != 4 || a.ManageListen != ":8081" || a.MaxInFlight != 4 {
		t.Fatalf("defaults: %+v, %v", a, err)
	}
	if a, err := App(env("AF_APP_MANAGE_LISTEN", "127.0.0.1:9090", "AF_APP_MAX_IN_FLIGHT", "64")); err != nil || a.ManageListen != "127.0.0.1:9090" || a.MaxInFlight != 64 {
		t.Fatalf("management address and in-flight limit: %+v, %v", a, err)
	}
	for _, c := range [][2]string{
		{"AF_APP_NAMESPACE", "Af_System"}, {"AF_APP_NAMESPACE", strings.Repeat("a", 64)}, {"AF_APP_NAMESPACE", "-x"},
		{"AF_APP_WORKERS", "0"}, {"AF_APP_WORKERS", "many"},
		{"AF_APP_MAX_IN_FLIGHT", "0"}, {"AF_APP_MAX_IN_FLIGHT", "65"}, {"AF_APP_MAX_IN_FLIGHT", "lots"}, {"AF_APP_REAP_INTERVAL", "1s"}, {"AF_APP_ID", "-3"},
		{"AF_GITHUB_RATE_WAIT", "soon"}, {"AF_APP_PRIVATE_KEY_FILE", filepath.Join(t.TempDir(), "none.pem")},
	} {
		_, err := App(env(c[0], c[1]))
		if err == nil || !strings.Contains(err.Error(), "AF-GH-007") || !strings.Contains(err.Error(), c[0]) {
			t.Errorf("%s=%q: %v", c[0], c[1], err)
		}
	}
}

// Runtime is the one construction: the same answer for a provider wherever af runs.
func TestRuntimeForProvider(t *testing.T) {
	getenv := func(string) string { return "" }
	for provider, want := range map[string]*failure.Entry{"kubernetes": nil, "": nil, "local": failure.Unavailable, "nomad": failure.RuntimeCannot} {
		rt, err := Runtime(getenv, provider, "", nil)
		switch {
		case want == nil && (err != nil || rt == nil || rt.Name() != "kubernetes"):
			t.Errorf("%q: %v %v, want the kubernetes runtime", provider, rt, err)
		case want != nil && !errors.Is(err, want):
			t.Errorf("%q: %v, want %s", provider, err, want.Code)
		}
	}
}
