package build

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Program describes one Go program built in its own throwaway module.
type Program struct {
	// Name names the cache entry and the output binary.
	Name string
	// Version is the upstream release; with everything else that builds the
	// program it keys the cache entry (Key).
	Version string
	// GoMod is the complete go.mod of the throwaway module.
	GoMod string
	// Files are extra source files of the throwaway module (name -> content).
	Files map[string]string
	// Package is the package path to build ("." for the module's own main).
	Package string
	// LDFlags and Tags are passed to go build.
	LDFlags string
	Tags    string
	// Patch, when set, builds a changed copy of one upstream module (Patch.Module at
	// Patch.Version, copied into ./upstream and replaced there in GoMod).
	Patch *Patch
}

// Patch changes a copy of an upstream module before the build: exact text edits, each
// of which must match as often as it says (so a new upstream version that moved the
// code fails the build loudly instead of building something unchanged), and added files.
type Patch struct {
	Module, Version string
	Edits           []Edit
	// Files are added to the copy (path relative to the module's root -> content).
	Files map[string]string
}

// Edit replaces Old by New in File, which must contain Old exactly Count times (1 if 0).
type Edit struct {
	File, Old, New string
	Count          int
}

// PatchDir is where a patched module is copied, relative to the throwaway module.
const PatchDir = "upstream"

// Builder builds programs into a cache directory.
type Builder struct {
	// CacheDir is where throwaway modules and binaries live, e.g. $HOME/.cache/af.
	CacheDir string
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// Key names p's cache entry: its name and version, then a hash of everything
// that decides what the build makes (the throwaway module's text and files,
// the package, the flags, the Go toolchain and target). Change any of them and
// the program is rebuilt in a fresh entry; an entry is never reused for
// another recipe.
func (p Program) Key() string {
	h := sha256.New()
	fmt.Fprintf(h, "go.mod\x00%s\x00", p.GoMod)
	names := make([]string, 0, len(p.Files))
	for n := range p.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "file\x00%s\x00%s\x00", n, p.Files[n])
	}
	if p.Patch != nil {
		fmt.Fprintf(h, "patch\x00%s\x00%s\x00", p.Patch.Module, p.Patch.Version)
		for _, e := range p.Patch.Edits {
			fmt.Fprintf(h, "edit\x00%s\x00%s\x00%s\x00%d\x00", e.File, e.Old, e.New, e.Count)
		}
		names := make([]string, 0, len(p.Patch.Files))
		for n := range p.Patch.Files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(h, "pfile\x00%s\x00%s\x00", n, p.Patch.Files[n])
		}
	}
	fmt.Fprintf(h, "pkg\x00%s\x00ldflags\x00%s\x00tags\x00%s\x00", p.Package, p.LDFlags, p.Tags)
	fmt.Fprintf(h, "go\x00%s\x00%s/%s\x00cgo=0\x00trimpath\x00", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return fmt.Sprintf("%s-%s-%s", p.Name, p.Version, hex.EncodeToString(h.Sum(nil))[:12])
}

func (b *Builder) dir(p Program) string { return filepath.Join(b.CacheDir, "build", p.Key()) }

// Binary returns the cached binary of p, building it first when absent.
func (b *Builder) Binary(ctx context.Context, p Program) (string, error) {
	dir := b.dir(p)
	out := filepath.Join(dir, "bin", p.Name)
	if fileExists(out + ".ok") {
		return out, nil
	}
	unlock, err := LockFile(ctx, filepath.Join(b.CacheDir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(out + ".ok") { // built by someone else while we waited
		return out, nil
	}
	start := time.Now()
	b.logf("building %s %s (cached afterwards in %s)", p.Name, p.Version, dir)
	if err := b.Prefetch(ctx, p); err != nil {
		return "", err
	}
	args := []string{"build", "-trimpath", "-o", out}
	if p.LDFlags != "" {
		args = append(args, "-ldflags", p.LDFlags)
	}
	if p.Tags != "" {
		args = append(args, "-tags", p.Tags)
	}
	args = append(args, p.Package)
	if err := b.goCmd(ctx, dir, args...); err != nil {
		return "", fmt.Errorf("build %s: go build: %w", p.Name, err)
	}
	if err := os.WriteFile(out+".ok", []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("build %s: %w", p.Name, err)
	}
	b.logf("built %s %s in %s", p.Name, p.Version, time.Since(start).Round(time.Second))
	return out, nil
}

// Prefetch writes p's throwaway module and resolves and downloads its
// dependencies (go mod tidy), without building. It needs little CPU, so it can
// run beside another program's build; Binary calls it too.
func (b *Builder) Prefetch(ctx context.Context, p Program) error {
	dir := b.dir(p)
	if fileExists(filepath.Join(dir, "bin", p.Name+".ok")) {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return fmt.Errorf("prefetch %s: %w", p.Name, err)
	}
	unlock, err := LockFile(ctx, filepath.Join(dir, "prefetch.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if fileExists(filepath.Join(dir, "prefetched")) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(p.GoMod), 0o644); err != nil {
		return fmt.Errorf("prefetch %s: %w", p.Name, err)
	}
	for name, content := range p.Files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("prefetch %s: %w", p.Name, err)
		}
	}
	if p.Patch != nil {
		if err := b.patch(ctx, dir, p); err != nil {
			return fmt.Errorf("prefetch %s: %w", p.Name, err)
		}
	}
	if err := b.goCmd(ctx, dir, "mod", "tidy"); err != nil {
		return fmt.Errorf("prefetch %s: go mod tidy: %w", p.Name, err)
	}
	if err := b.goCmd(ctx, dir, "mod", "download"); err != nil {
		return fmt.Errorf("prefetch %s: go mod download: %w", p.Name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prefetched"), nil, 0o644); err != nil {
		return fmt.Errorf("prefetch %s: %w", p.Name, err)
	}
	return nil
}

func (b *Builder) goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-buildvcs=false")
	logPath := filepath.Join(dir, "build.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(f, "$ go %s\n", strings.Join(args, " "))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w (log: %s)", err, logPath)
	}
	return nil
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		b.Log(format, args...)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// lockFile takes an exclusive flock on path, waiting until ctx is done.
func LockFile(ctx context.Context, path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
