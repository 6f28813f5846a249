// Package afbuild builds af's binary for tests, one way everywhere: the module's ./cmd/af,
// static (CGO_ENABLED=0) and with -trimpath, as the engine image and the release carry it,
// with the -ldflags a test asks for.
//
// A test package whose TestMain runs Main shares one binary per set of flags among all its
// tests: the first test that asks builds it into a directory of the test process, and Main
// removes that directory when the tests have run. Without Main, every call builds into the
// calling test's own temporary directory, removed with it; go's build cache keeps that to a
// link of a few seconds. No binary outlives the test process either way.
//
// It imports "testing": only tests and test tools (the test cluster) import it, never af's own
// commands.
package afbuild

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// Module is the path of af's module, whose go.mod ModuleRoot looks for.
const Module = "github.com/antifailure/af"

// Option changes what is built.
type Option func(*options)

type options struct {
	pkg     string
	ldflags string
}

// key tells builds apart: one binary per package and flags.
func (o options) key() string { return o.pkg + "\x00" + o.ldflags }

// LDFlags passes flags to go build's -ldflags: "-s -w", "-X pkg.Var=value".
func LDFlags(flags string) Option { return func(o *options) { o.ldflags = flags } }

// Package builds the main package pkg (relative to the module, "./web") instead of ./cmd/af,
// with the same flags: the test images' programs.
func Package(pkg string) Option { return func(o *options) { o.pkg = pkg } }

var (
	mu     sync.Mutex
	shared string // the test process's directory; "" without Main
	builds = map[string]*build{}
)

// build is one binary of the shared directory, built once.
type build struct {
	once sync.Once
	path string
	err  error
}

// Main runs the package's tests, sharing each binary among them, and removes the binaries
// afterwards. It is the package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(afbuild.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "afbuild-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "afbuild: a directory for the test binaries: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	mu.Lock()
	shared = dir
	mu.Unlock()
	return m.Run()
}

// Binary returns the path of af's binary built from this module (named af), or of the program
// Package names, failing t when it cannot be built.
func Binary(t testing.TB, opts ...Option) string {
	t.Helper()
	o := options{pkg: "./cmd/af"}
	for _, opt := range opts {
		opt(&o)
	}
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	dir := shared
	b := builds[o.key()]
	if dir != "" && b == nil {
		b = &build{path: filepath.Join(dir, strconv.Itoa(len(builds)), filepath.Base(o.pkg))}
		builds[o.key()] = b
	}
	mu.Unlock()
	if dir == "" {
		out := filepath.Join(t.TempDir(), filepath.Base(o.pkg))
		if err := run(context.Background(), root, out, o); err != nil {
			t.Fatal(err)
		}
		return out
	}
	b.once.Do(func() { b.err = run(context.Background(), root, b.path, o) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Build builds af's binary (or the program Package names) from the module at dir into out, as
// Binary does: for test tools with no test at hand (the test cluster's engine image), and for
// programs of another module (the example's services).
func Build(ctx context.Context, dir, out string, opts ...Option) error {
	o := options{pkg: "./cmd/af"}
	for _, opt := range opts {
		opt(&o)
	}
	return run(ctx, dir, out, o)
}

// run is the one build command: go build -trimpath, static, in the module at dir.
func run(ctx context.Context, dir, out string, o options) error {
	args := []string{"build", "-trimpath"}
	if o.ldflags != "" {
		args = append(args, "-ldflags", o.ldflags)
	}
	args = append(args, "-o", out, o.pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// Last wins: a test run under -race has CGO_ENABLED=1 in its environment.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s (in %s): %w\n%s", o.pkg, dir, err, b)
	}
	return nil
}

// ModuleRoot returns the directory of af's go.mod, the first found walking up from the working
// directory (a test's is its package's).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding af's module: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modulePath(data) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("finding af's module: no go.mod of %s above the working directory", Module)
		}
		dir = parent
	}
}

// modulePath is the path a go.mod's module line names.
func modulePath(gomod []byte) string {
	for line := range bytes.Lines(gomod) {
		if rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("module")); ok && len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			return string(bytes.Trim(bytes.TrimSpace(rest), `"`))
		}
	}
	return ""
}
