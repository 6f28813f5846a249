// Package version says which build of af this is. The Makefile sets Version and Commit with
// -ldflags -X; a plain `go build` leaves them as "dev" and "unknown". EngineDigest is
// generated (engine_gen.go).
package version

import (
	"runtime"
	"strings"
)

// Set at link time.
var (
	Version = "dev"
	Commit  = "unknown"
)

// Release is the version the next release publishes: action.yml runs
// ghcr.io/antifailure/af:<Release>, and the release workflow refuses a tag that differs.
const Release = "v0.1.0"

// ActionImage is the action's image by its release's tag: what the tests build and load, and
// what action.yml and the App's Deployment name until hack/release.sh pins them by digest.
const ActionImage = "ghcr.io/antifailure/af:" + Release

// ActionRepository is where the release pushes the action's image (also the App's).
const ActionRepository = "ghcr.io/antifailure/af"

// PinnedActionImage reports whether ref is the action's image as a release writes it into
// action.yml and deploy/app/deployment.yaml: ActionRepository@sha256:<64 hex digits>.
func PinnedActionImage(ref string) bool {
	digest, ok := strings.CutPrefix(ref, ActionRepository+"@sha256:")
	if !ok || len(digest) != 64 {
		return false
	}
	for _, c := range digest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// LocalEngineImage is the engine image of this build: the released one's name, so a cluster
// with no registry configured pulls exactly what release.yml pushed (its tag is the source
// digest of the sidecar and the gate this binary carries), and a node the image was imported
// into (make engine-image) finds it under the same name.
const LocalEngineImage = EngineRepository + ":" + EngineDigest

// EngineRepository is the engine image's repository, where release.yml pushes it: the image
// that runs as the sidecar, the gate and the probe (af's own binary, nothing else).
const EngineRepository = "ghcr.io/antifailure/af-engine"

// Engine image variables: AF_ENGINE_IMAGE names another engine image; AF_PROXY_IMAGE, its
// old name, is still read when the new one is not set.
const (
	EngineImageVar      = "AF_ENGINE_IMAGE"
	EngineImageVarAlias = "AF_PROXY_IMAGE"
)

// EngineImageFrom returns the engine image af's environment names, and the variable that
// named it; "" when neither is set.
func EngineImageFrom(getenv func(string) string) (image, from string) {
	if getenv == nil {
		return "", ""
	}
	for _, k := range []string{EngineImageVar, EngineImageVarAlias} {
		if v := getenv(k); v != "" {
			return v, k
		}
	}
	return "", ""
}

// Info is what `af version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// EngineDigest is the digest of the sidecar's and the gate's source this build carries.
	EngineDigest string `json:"engine_digest"`
	// EngineImage is the engine image af deploys: AF_ENGINE_IMAGE (or AF_PROXY_IMAGE), else
	// LocalEngineImage.
	EngineImage string `json:"engine_image"`
}

// Get returns this build's Info; getenv reads AF_ENGINE_IMAGE and AF_PROXY_IMAGE (nil: not
// read).
func Get(getenv func(string) string) Info {
	img := LocalEngineImage
	if v, _ := EngineImageFrom(getenv); v != "" {
		img = v
	}
	return Info{
		Version:      Version,
		Commit:       Commit,
		GoVersion:    runtime.Version(),
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
		EngineDigest: EngineDigest,
		EngineImage:  img,
	}
}
