package build

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// patch copies p.Patch's module out of the module cache into dir/upstream and applies the
// edits and files there. The copy is made afresh each time (a half-patched copy from an
// interrupted run is never built).
func (b *Builder) patch(ctx context.Context, dir string, p Program) error {
	pt := p.Patch
	src, err := moduleDir(ctx, pt.Module, pt.Version)
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, PatchDir)
	if err := os.RemoveAll(dst); err != nil {
		return fmt.Errorf("patch %s: %w", pt.Module, err)
	}
	if err := copyTree(src, dst); err != nil {
		return fmt.Errorf("patch %s: copy %s: %w", pt.Module, src, err)
	}
	for _, e := range pt.Edits {
		path := filepath.Join(dst, filepath.FromSlash(e.File))
		text, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("patch %s: %w", pt.Module, err)
		}
		want := e.Count
		if want == 0 {
			want = 1
		}
		if n := strings.Count(string(text), e.Old); n != want {
			return fmt.Errorf("patch %s %s: %s has the text to replace %d time(s), want %d: %q (the upstream code moved; update build.%s)", pt.Module, pt.Version, e.File, n, want, firstLine(e.Old), p.Name)
		}
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(text), e.Old, e.New)), 0o644); err != nil {
			return fmt.Errorf("patch %s: %w", pt.Module, err)
		}
	}
	for name, content := range pt.Files {
		path := filepath.Join(dst, filepath.FromSlash(name))
		if _, err := os.Stat(path); err == nil {
			return fmt.Errorf("patch %s: %s already exists upstream; an added file must be new", pt.Module, name)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return fmt.Errorf("patch %s: %w", pt.Module, err)
		}
	}
	return nil
}

// moduleDir downloads module@version into the module cache and returns its directory there.
// It runs outside any module: the throwaway module's go.mod already points at the copy
// that does not exist yet.
func moduleDir(ctx context.Context, module, version string) (string, error) {
	tmp, err := os.MkdirTemp("", "afbuild-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s%s", module, version, err, errb.String(), out.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}

// copyTree copies the regular files and directories under src to dst, writable (the
// module cache's copy is read-only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
