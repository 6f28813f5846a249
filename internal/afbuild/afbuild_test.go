package afbuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

const hello = "./internal/afbuild/testdata/hello"

func say(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestShared: under Main, one binary per set of flags, built once and kept in the process's
// directory; other flags, another binary.
func TestShared(t *testing.T) {
	a := Binary(t, Package(hello))
	if again := Binary(t, Package(hello)); again != a {
		t.Errorf("built twice: %s and %s", a, again)
	}
	if filepath.Base(a) != "hello" || !strings.HasPrefix(a, shared) {
		t.Errorf("built at %s, not as hello in %s", a, shared)
	}
	if got := say(t, a); got != "hello" {
		t.Errorf("says %q", got)
	}
	x := Binary(t, Package(hello), LDFlags("-X main.greeting=stamped"))
	if x == a {
		t.Fatal("other flags, the same binary")
	}
	if got := say(t, x); got != "stamped" {
		t.Errorf("-ldflags not passed: says %q", got)
	}
}

// TestBuild: Build writes the program where it is told, from the module named.
func TestBuild(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "af")); err != nil {
		t.Fatalf("module root %s has no cmd/af: %v", root, err)
	}
	out := filepath.Join(t.TempDir(), "hello")
	if err := Build(context.Background(), root, out, Package(hello)); err != nil {
		t.Fatal(err)
	}
	if got := say(t, out); got != "hello" {
		t.Errorf("says %q", got)
	}
	if err := Build(context.Background(), root, out, Package("./internal/afbuild/testdata/none")); err == nil || !strings.Contains(err.Error(), "go build") {
		t.Errorf("a package that is not there: %v", err)
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module github.com/antifailure/af\n\ngo 1.26.0\n": Module,
		"// comment\nmodule \"example.com/x\"\n":          "example.com/x",
		"go 1.26\n":                                       "",
		"modules x\n":                                     "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}
