package images

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/antifailure/af/failure"
)

// The Docker Engine API path. Where the docker CLI is not installed (the action's image is af
// alone), af speaks the daemon's API itself: POST /build with the context as a tar stream and
// the classic builder (version=1), then GET /images/{name}/get for the archive. The classic
// builder is deprecated in favour of BuildKit, which the API reaches only through a gRPC
// session the client must serve (moby/buildkit's session packages, as the docker CLI does);
// af chooses the classic endpoint because every daemon still serves it, it needs no session,
// and FROM/COPY/RUN/ARG/--target builds are what previews use. A Dockerfile that needs
// BuildKit (RUN --mount, heredocs) fails with the daemon's own message: build it in an earlier
// step and give the image instead.

// engineAPIVersion is the API version af asks for: Docker 20.10 and every later daemon serve it.
const engineAPIVersion = "v1.41"

// useAPI says whether builds go through the Engine API rather than the CLI.
func (d *Docker) useAPI() bool {
	if d.API {
		return true
	}
	_, err := exec.LookPath("docker")
	return err != nil
}

// apiClient returns an HTTP client and base URL for the daemon DOCKER_HOST names.
func (d *Docker) apiClient() (*http.Client, string, error) {
	host := d.Host
	if host == "" {
		host = "unix:///var/run/docker.sock"
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, "", fmt.Errorf("DOCKER_HOST %q: %w", host, err)
	}
	switch u.Scheme {
	case "unix":
		sock := u.Path
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", sock)
		}}
		return &http.Client{Transport: tr}, "http://docker/" + engineAPIVersion, nil
	case "tcp", "http":
		return &http.Client{}, "http://" + u.Host + "/" + engineAPIVersion, nil
	}
	return nil, "", fmt.Errorf("DOCKER_HOST %q: af speaks the Engine API over unix:// and tcp:// (no TLS) without the docker CLI", host)
}

func (d *Docker) apiAvailable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, base, err := d.apiClient()
	if err != nil {
		return failure.New(failure.BuildFailed, err.Error(), err)
	}
	where := d.Host
	if where == "" {
		where = "unix:///var/run/docker.sock (DOCKER_HOST unset)"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/version", nil)
	resp, err := c.Do(req)
	if err != nil {
		return failure.New(failure.BuildFailed, fmt.Sprintf("no container daemon answered at %s (the Engine API; the docker CLI is not installed)", where), err)
	}
	defer resp.Body.Close()
	var v struct{ Version string }
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return failure.Newf(failure.BuildFailed, "the container daemon at %s answered /version with HTTP %d", where, resp.StatusCode)
	}
	progress(d.Progress, "container daemon %s answers (Engine API %s, classic builder)", v.Version, engineAPIVersion)
	return nil
}

// apiBuild builds b through the Engine API and saves the image at archive.
func (d *Docker) apiBuild(ctx context.Context, b BuildSpec, tag, archive, dockerfile string) (string, error) {
	c, base, err := d.apiClient()
	if err != nil {
		return "", err
	}
	q := url.Values{"t": {tag}, "dockerfile": {filepath.ToSlash(dockerfile)}, "rm": {"1"}, "forcerm": {"1"}, "version": {"1"}}
	if b.Target != "" {
		q.Set("target", b.Target)
	}
	if len(b.Args) > 0 {
		args, _ := json.Marshal(b.Args)
		q.Set("buildargs", string(args))
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(contextTar(pw, b.Context, dockerfile)) }()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/build?"+q.Encode(), pr)
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := c.Do(req)
	if err != nil {
		pr.Close()
		return "", err
	}
	defer resp.Body.Close()
	var lines []string
	keep := func(s string) {
		for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
			if strings.TrimSpace(l) == "" {
				continue
			}
			lines = append(lines, l)
			if len(lines) > 20 {
				lines = lines[1:]
			}
			progress(d.Progress, "  %s | %s", b.Service, l)
		}
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		keep(string(body))
		return strings.Join(lines, "\n"), fmt.Errorf("the daemon refused the build: HTTP %d", resp.StatusCode)
	}
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return strings.Join(lines, "\n"), fmt.Errorf("reading the daemon's build output: %w", err)
		}
		keep(msg.Stream + msg.Status)
		if msg.Error != "" {
			keep(msg.Error)
			return strings.Join(lines, "\n"), errors.New(msg.Error)
		}
	}
	tail := strings.Join(lines, "\n")
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/images/"+url.PathEscape(tag)+"/get", nil)
	saved, err := c.Do(req)
	if err != nil {
		return tail, fmt.Errorf("saving %s: %w", tag, err)
	}
	defer saved.Body.Close()
	if saved.StatusCode != http.StatusOK {
		return tail, fmt.Errorf("saving %s: HTTP %d", tag, saved.StatusCode)
	}
	f, err := os.Create(archive)
	if err != nil {
		return tail, err
	}
	if _, err := io.Copy(f, saved.Body); err != nil {
		f.Close()
		return tail, fmt.Errorf("saving %s: %w", tag, err)
	}
	return tail, f.Close()
}

// contextTar writes the build context dir as a tar stream, leaving out what its .dockerignore
// excludes (the Dockerfile and .dockerignore always go, as the docker CLI sends them).
func contextTar(w io.Writer, dir, dockerfile string) error {
	var patterns []string
	if f, err := os.Open(filepath.Join(dir, ".dockerignore")); err == nil {
		patterns, err = ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("reading .dockerignore: %w", err)
		}
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		return fmt.Errorf(".dockerignore: %w", err)
	}
	always := map[string]bool{filepath.ToSlash(filepath.Clean(dockerfile)): true, ".dockerignore": true}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if e.Name() == ".git" {
			// Never in a build context, whatever .dockerignore says: actions/checkout keeps the
			// job's token in .git/config, and a pull request's Dockerfile could read it.
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !always[rel] {
			skip, err := pm.MatchesOrParentMatches(rel)
			if err != nil {
				return err
			}
			if skip {
				if e.IsDir() && !pm.Exclusions() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name = rel
		if e.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
