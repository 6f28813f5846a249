// Package version says which build of af this is. The Makefile sets Version and Commit with
// -ldflags -X; a plain `go build` leaves them as "dev" and "unknown".
package version

import (
	"runtime"
)

// Set at link time.
var (
	Version = "dev"
	Commit  = "unknown"
)

// Info is what `af version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Get returns this build's Info.
func Get() Info {
	return Info{
		Version:   Version,
		Commit:    Commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
}
