// Package version says which build of af this is. The Makefile sets Version and Commit with
// -ldflags -X; a plain `go build` leaves them as "dev" and "unknown". EngineDigest is
// generated (engine_gen.go).
package version

import (
	"runtime"
)

// Set at link time.
var (
	Version = "dev"
	Commit  = "unknown"
)

// LocalEngineImage is the engine image's local name for this build.
const LocalEngineImage = "antifailure/proxy:" + EngineDigest

// Info is what `af version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	// EngineDigest is the digest of the sidecar's and the gate's source this build carries.
	EngineDigest string `json:"engine_digest"`
	// EngineImage is the engine image af deploys: AF_PROXY_IMAGE, else LocalEngineImage.
	EngineImage string `json:"engine_image"`
}

// Get returns this build's Info; getenv reads AF_PROXY_IMAGE (nil: not read).
func Get(getenv func(string) string) Info {
	img := LocalEngineImage
	if getenv != nil && getenv("AF_PROXY_IMAGE") != "" {
		img = getenv("AF_PROXY_IMAGE")
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
