package images

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/internal/testreq"
)

// daemon returns the container daemon the build tests use: AF_DOCKER_HOST, which the
// integration phase of make test sets after starting a private dockerd (no iptables, no
// masquerade, no bridge). Without it the tests skip, loudly.
func daemon(t *testing.T) *Docker {
	t.Helper()
	host := os.Getenv("AF_DOCKER_HOST")
	if host == "" {
		testreq.Elsewhere(t, "needs a container daemon; make test starts one and sets AF_DOCKER_HOST")
	}
	return &Docker{Host: host, Progress: t.Logf, Timeout: 2 * time.Minute}
}

// TestBuildWithTheDaemon builds a multi-stage Dockerfile with a build argument and a target on
// a real daemon, saves it, and reads the archive back: the target stage's file, the argument's
// value, the entrypoint.
//
// Both ways af talks to the daemon: the docker CLI, and the Engine API itself (the action's
// image has no CLI).
func TestBuildWithTheDaemon(t *testing.T) {
	for _, api := range []bool{false, true} {
		t.Run(map[bool]string{false: "docker CLI", true: "Engine API"}[api], func(t *testing.T) {
			d := daemon(t)
			d.API = api
			buildWithTheDaemon(t, d)
		})
	}
}

func buildWithTheDaemon(t *testing.T, d *Docker) {
	ctx := context.Background()
	if err := d.Available(ctx); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("greeting.txt", "hello from the build context\n")
	write(".dockerignore", "*.secret\n")
	write("key.secret", "never sent to the daemon\n")
	write("other.txt", "the other stage\n")
	// The checkout's .git, where actions/checkout keeps the job's token: never sent.
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(".git/config", "[http]\n\textraheader = AUTHORIZATION: basic s3cret\n")
	write("build.Dockerfile", `FROM scratch AS app
ARG FLAVOUR=plain
LABEL flavour=$FLAVOUR
COPY greeting.txt /greeting.txt
COPY . /ctx/
ENTRYPOINT ["/app"]

FROM scratch AS other
COPY other.txt /other.txt
`)
	archive := filepath.Join(t.TempDir(), "img.tar")
	err := d.Build(ctx, BuildSpec{Service: "web", Context: dir, Dockerfile: "build.Dockerfile", Target: "app", Args: map[string]string{"FLAVOUR": "salted"}}, "af.local/test/web:build", archive)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Labels["flavour"] != "salted" || strings.Join(cfg.Config.Entrypoint, " ") != "/app" {
		t.Errorf("config: labels %v entrypoint %v", cfg.Config.Labels, cfg.Config.Entrypoint)
	}
	files := map[string]string{}
	layers, _ := img.Layers()
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
		rc.Close()
	}
	if _, sent := files["ctx/.git/config"]; sent {
		t.Errorf("the checkout's .git went to the daemon: the image holds %v", files)
	}
	if _, sent := files["ctx/key.secret"]; sent || files["ctx/greeting.txt"] == "" {
		t.Errorf(".dockerignore not honoured: the context in the image holds %v", files)
	}
	if files["greeting.txt"] != "hello from the build context\n" || files["other.txt"] != "" {
		t.Errorf("files in the image: %v", files)
	}

	// A failing build names the service and shows the daemon's last lines.
	write("broken.Dockerfile", "FROM scratch\nCOPY missing.txt /missing.txt\n")
	err = d.Build(ctx, BuildSpec{Service: "api", Context: dir, Dockerfile: "broken.Dockerfile"}, "af.local/test/api:build", filepath.Join(t.TempDir(), "x.tar"))
	if !errors.Is(err, failure.BuildFailed) || !strings.Contains(err.Error(), "building api") || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("broken build: %v", err)
	}
}

// TestContextTar: the context sent to the Engine API leaves out what .dockerignore excludes,
// keeps what it re-includes, and always holds the Dockerfile.
func TestContextTar(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		".dockerignore": "node_modules\n*.log\n!keep.log\nDockerfile\n", "Dockerfile": "FROM scratch\n", "main.go": "package main\n",
		"debug.log": "x", "keep.log": "y", "node_modules/a/b.js": "z", "sub/c.txt": "c",
	})
	got := contextNames(t, dir)
	want := []string{".dockerignore", "Dockerfile", "keep.log", "main.go", "sub/", "sub/c.txt"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("context holds %v, want %v", got, want)
	}
}

// TestContextNeverHoldsGit: .git (the checkout's, where actions/checkout keeps the job's token,
// a submodule's or a worktree's .git file) never goes into a build context, even when
// .dockerignore re-includes it or there is none.
func TestContextNeverHoldsGit(t *testing.T) {
	for _, ignore := range []string{"", "*\n!.git\n!Dockerfile\n!main.go\n!sub\n"} {
		dir := t.TempDir()
		files := map[string]string{"Dockerfile": "FROM scratch\nCOPY . /src\n", "main.go": "package main\n",
			".git/config": "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3MzY3JldA==\n",
			".git/HEAD":   "ref: refs/heads/main\n", "sub/.git": "gitdir: ../.git/modules/sub\n", "sub/a.txt": "a"}
		if ignore != "" {
			files[".dockerignore"] = ignore
		}
		writeTree(t, dir, files)
		got := contextNames(t, dir)
		for _, name := range got {
			if strings.Contains("/"+name, "/.git") {
				t.Errorf(".dockerignore %q: the context holds %s", ignore, name)
			}
		}
		if !slices.Contains(got, "main.go") || !slices.Contains(got, "sub/a.txt") {
			t.Errorf(".dockerignore %q: the context holds %v, want main.go and sub/a.txt in it", ignore, got)
		}
	}
}

// writeTree writes files (path: content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// contextNames lists the entries of the build context af sends for dir, in order.
func contextNames(t *testing.T, dir string) []string {
	t.Helper()
	b, err := contextBytes(dir, "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(strings.NewReader(string(b)))
	for {
		h, err := tr.Next()
		if err != nil {
			return got
		}
		got = append(got, h.Name)
	}
}

// TestNoDaemon: a daemon that does not answer is AF-RUN-008 saying where af looked.
func TestNoDaemon(t *testing.T) {
	for _, api := range []bool{false, true} {
		d := &Docker{Host: "unix://" + filepath.Join(t.TempDir(), "nothing.sock"), API: api}
		err := d.Available(context.Background())
		if !errors.Is(err, failure.BuildFailed) || !strings.Contains(err.Error(), "no container daemon answered at unix://") {
			t.Errorf("api %v: got %v", api, err)
		}
	}
}

// contextBytes is contextTar into memory.
func contextBytes(dir, dockerfile string) ([]byte, error) {
	var b bytes.Buffer
	err := contextTar(&b, dir, dockerfile)
	return b.Bytes(), err
}
