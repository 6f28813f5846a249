package images

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

// Docker builds images with a container daemon through the docker CLI (the Docker API's own
// client), so whatever daemon DOCKER_HOST names builds them: Docker, or anything speaking its
// API. The daemon runs on the machine that runs af, which the cluster's nodes cannot see:
// every built image is saved as an archive and published before any pod asks for it.
type Docker struct {
	// Host is DOCKER_HOST; empty uses the CLI's default.
	Host string
	// Timeout bounds one build (default 15 minutes).
	Timeout  time.Duration
	Progress func(format string, args ...any)
	// API speaks the daemon's Engine API directly even when the docker CLI is installed;
	// without the CLI af always does (engineapi.go).
	API bool
}

// BuildSpec is one service's build.
type BuildSpec struct {
	Service    string
	Context    string // a directory
	Dockerfile string // relative to Context
	Target     string
	Args       map[string]string
}

func (d *Docker) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "docker", args...)
	if d.Host != "" {
		cmd.Env = append(cmd.Environ(), "DOCKER_HOST="+d.Host)
	}
	return cmd
}

// Available checks that the CLI is there and a daemon answers, within ten seconds.
func (d *Docker) Available(ctx context.Context) error {
	if d.useAPI() {
		return d.apiAvailable(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := d.command(ctx, "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		where := d.Host
		if where == "" {
			where = "the docker CLI's default (DOCKER_HOST unset)"
		}
		if errors.Is(err, exec.ErrNotFound) {
			return failure.New(failure.BuildFailed, "the docker CLI is not installed, so no image can be built", err)
		}
		return failure.New(failure.BuildFailed, fmt.Sprintf("no container daemon answered at %s; last lines:\n%s", where, failure.Indent(failure.LastLines(string(out), 3))), err)
	}
	progress(d.Progress, "container daemon %s answers", strings.TrimSpace(string(out)))
	return nil
}

// Build builds the image as tag and saves it as a docker archive at archive.
func (d *Docker) Build(ctx context.Context, b BuildSpec, tag, archive string) error {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	// The CLI gets af's own context on its standard input, as the Engine API does: the same
	// files whichever way af builds, and never .git (contextTar).
	args := []string{"build", "--file", filepath.ToSlash(filepath.Clean(dockerfile)), "--tag", tag}
	if b.Target != "" {
		args = append(args, "--target", b.Target)
	}
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		args = append(args, "--build-arg", k+"="+b.Args[k])
	}
	args = append(args, "-")
	start := time.Now()
	var tail string
	var err error
	if d.useAPI() {
		progress(d.Progress, "build %s: Engine API POST /build (context %s, dockerfile %s)", b.Service, b.Context, dockerfile)
		tail, err = d.apiBuild(ctx, b, tag, archive, dockerfile)
	} else {
		progress(d.Progress, "build %s: docker %s (context %s)", b.Service, strings.Join(args, " "), b.Context)
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(contextTar(pw, b.Context, dockerfile)) }()
		tail, err = d.stream(ctx, b.Service, pr, args...)
		pr.Close()
	}
	if err != nil {
		why := err.Error()
		if ctx.Err() == context.DeadlineExceeded {
			why = fmt.Sprintf("it did not finish within %s", timeout)
		}
		return failure.New(failure.BuildFailed, fmt.Sprintf("building %s (%s): %s; last lines:\n%s", b.Service, filepath.Join(b.Context, dockerfile), why, failure.Indent(tail)), err)
	}
	if !d.useAPI() {
		if out, err := d.command(ctx, "save", "--output", archive, tag).CombinedOutput(); err != nil {
			return failure.New(failure.BuildFailed, fmt.Sprintf("saving %s: %v; last lines:\n%s", tag, err, failure.Indent(failure.LastLines(string(out), 3))), err)
		}
	}
	progress(d.Progress, "build %s: built in %s", b.Service, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// stream runs docker, passing each output line to progress, and returns the last lines.
// stdin, when not nil, is its standard input.
func (d *Docker) stream(ctx context.Context, service string, stdin io.Reader, args ...string) (string, error) {
	cmd := d.command(ctx, args...)
	cmd.Stdin = stdin
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var lines []string
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			lines = append(lines, line)
			if len(lines) > 20 {
				lines = lines[1:]
			}
			mu.Unlock()
			progress(d.Progress, "  %s | %s", service, line)
		}
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return strings.Join(lines, "\n"), err
}

// BuildServices builds, with the daemon d, every service of m that has build: and is in
// neither given (images the caller has) nor archives, writes each as a docker archive and adds
// it to archives, which are then published like any other. base is the directory build
// contexts are relative to (the manifest's). The archives live in the system's temporary
// directory until the process ends.
func BuildServices(ctx context.Context, d *Docker, m *manifest.Manifest, base string, given, archives map[string]string) error {
	var todo []string
	for _, name := range manifest.StartOrder(m.Services) {
		if s := m.Services[name]; s.Build != nil && given[name] == "" && archives[name] == "" {
			todo = append(todo, name)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	if err := d.Available(ctx); err != nil {
		return failure.As(err).WithHint("Services " + strings.Join(todo, ", ") + " are built from source: start a container daemon, or pass --image SERVICE=REF or --image-archive SERVICE=PATH for each.")
	}
	dir, err := os.MkdirTemp("", "af-build")
	if err != nil {
		return failure.New(failure.Internal, "making a directory for the built images", err)
	}
	for _, name := range todo {
		b := m.Services[name].Build
		archive := filepath.Join(dir, name+".tar")
		spec := BuildSpec{Service: name, Context: filepath.Join(base, b.Context), Dockerfile: b.Dockerfile, Target: b.Target, Args: b.Args}
		if err := d.Build(ctx, spec, "af.local/"+m.Name+"/"+name+":build", archive); err != nil {
			return err
		}
		archives[name] = archive
	}
	return nil
}
