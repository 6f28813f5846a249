package action

// The images of the services built from source: the images input names the ones an earlier
// step built; the rest are built by the job's Docker daemon and handed to the runtime as
// archives.

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/preview"
)

// images returns the services' image references (the images input) and the archives of the
// services it built.
func (r *run) images(ctx context.Context) (map[string]string, map[string]string, error) {
	imgs := map[string]string{}
	for k, v := range r.in.Images {
		if _, ok := r.man.Services[k]; !ok {
			return nil, nil, failure.Newf(failure.ActionInputInvalid, "input images: the manifest has no service %s", k)
		}
		imgs[k] = v
	}
	tars := map[string]string{}
	for k, v := range r.tars { // the artifact's
		tars[k] = v
	}
	if !preview.NeedsBuild(r.man, imgs, tars) {
		return imgs, tars, nil
	}
	if r.in.Artifact != "" {
		return nil, nil, failure.Newf(failure.ActionInputInvalid, "input artifact: it holds no image for every service built from source; the deploy job never builds a pull request's code (the build run does)")
	}
	if err := preview.Build(ctx, r.getenv, r.logf, r.man, r.manifestDir(), imgs, tars); err != nil {
		if fe := failure.As(err); fe != nil && errors.Is(err, failure.BuildFailed) {
			var built []string
			for _, name := range manifest.StartOrder(r.man.Services) {
				if r.man.Services[name].Build != nil && imgs[name] == "" {
					built = append(built, name)
				}
			}
			return nil, nil, fe.WithHint("Services " + strings.Join(built, ", ") + " are built from source: give each in the images input (SERVICE=REF, built by an earlier step), or let the job's Docker socket (/var/run/docker.sock, or DOCKER_HOST) reach a daemon.")
		}
		return nil, nil, err
	}
	return imgs, tars, nil
}

// manifestDir is the directory of the manifest in the workspace: build contexts are relative to it.
func (r *run) manifestDir() string {
	return filepath.Dir(filepath.Join(r.workspace(), r.in.Manifest))
}
