// Package factory gives every af command what it shares: the streams, the global flags, the
// environment, and the manifest loader. Commands receive a *Factory instead of reaching for
// globals, so tests build one with buffers and a fake environment.
package factory

import (
	"encoding/json"
	"fmt"

	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// Output formats.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// Options are the global flags.
type Options struct {
	File    string
	Context string
	Output  string
	Quiet   bool
	NoColor bool
}

// Factory is what every command is built from.
type Factory struct {
	IO      *iostreams.IOStreams
	Options *Options
	Getenv  func(string) string
	// Runtime, when set, returns the runtime a manifest asks for instead of the real one
	// (envtarget.Runtime): a command's tests set a fake (runtime/runtimetest).
	Runtime func(*manifest.Manifest) (afruntime.Runtime, error)
}

// New returns a Factory over ios and an environment lookup.
func New(ios *iostreams.IOStreams, getenv func(string) string) *Factory {
	return &Factory{IO: ios, Options: &Options{File: "af.yaml", Output: OutputText}, Getenv: getenv}
}

// LoadManifest reads and validates the manifest named by -f. It returns the result even when
// the manifest has problems; the error is for a file that cannot be read at all.
func (f *Factory) LoadManifest() (*manifest.Result, error) {
	return manifest.Load(f.Options.File, f.IO.In)
}

// ManifestName names the manifest in messages: its path, or "standard input" for -f -.
func (f *Factory) ManifestName() string {
	if f.Options.File == "-" {
		return "standard input"
	}
	return f.Options.File
}

// ValidManifest reads the manifest and returns it, or the catalogued failure listing every
// problem. Warnings go to the error stream unless quiet.
func (f *Factory) ValidManifest() (*manifest.Manifest, error) {
	res, err := f.LoadManifest()
	if err != nil {
		return nil, err
	}
	f.PrintWarnings(res.Warnings)
	if err := res.Err(f.ManifestName()); err != nil {
		return nil, err
	}
	return res.Manifest, nil
}

// PrintWarnings writes manifest warnings to the error stream, unless quiet or JSON.
func (f *Factory) PrintWarnings(ws []manifest.Problem) {
	if f.IO.Quiet() || f.IO.JSON() {
		return
	}
	for _, w := range ws {
		f.IO.ErrLine(fmt.Sprintf("%s %s: %s", f.IO.Color(iostreams.Yellow, "warning:"), f.ManifestName(), w))
	}
}

// Infof writes an informational line to the error stream unless quiet or JSON, keeping
// standard output for results.
func (f *Factory) Infof(format string, args ...any) {
	if f.IO.Quiet() || f.IO.JSON() {
		return
	}
	f.IO.ErrLine(fmt.Sprintf(format, args...))
}

// WriteJSON writes v as indented JSON on standard output.
func (f *Factory) WriteJSON(v any) error {
	enc := json.NewEncoder(f.IO.Out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return failure.New(failure.Internal, "writing JSON output", err)
	}
	return nil
}

// Reported is a failure the command has already written out (as part of a JSON result, say);
// the caller exits with its status and prints nothing more.
type Reported struct{ Err *failure.Error }

func (r *Reported) Error() string { return r.Err.Error() }

// Unwrap returns the failure.
func (r *Reported) Unwrap() error { return r.Err }
