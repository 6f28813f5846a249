// Package validate implements `af validate`: read the manifest, report every problem with the
// path of the field at fault, or say it is valid and what it describes.
package validate

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/manifest"
)

// Result is what `af validate -o json` prints.
type Result struct {
	File     string             `json:"file"`
	Valid    bool               `json:"valid"`
	Problems []manifest.Problem `json:"problems"`
	Warnings []manifest.Problem `json:"warnings"`
	// Manifest is the manifest with every default applied; only when valid.
	Manifest *manifest.Manifest `json:"manifest,omitempty"`
	Error    *failure.Report    `json:"error,omitempty"`
}

// NewCmdValidate returns `af validate`.
func NewCmdValidate(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the manifest and report every problem",
		Long: `Reads the manifest (af.yaml, or -f FILE, or -f - for standard input) and reports every
problem found, each with the path of the field at fault and its line. Exits 0 when the manifest
is valid (warnings do not fail it), 2 when it has problems or cannot be read.

With -o json it prints {file, valid, problems, warnings, manifest, error}; manifest is the
manifest with every default applied.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return run(f) },
	}
}

func run(f *factory.Factory) error {
	file := f.ManifestName()
	res, err := f.LoadManifest()
	if err != nil {
		return err
	}
	verr := res.Err(file)
	if f.IO.JSON() {
		out := Result{File: file, Valid: res.Valid(), Problems: nonNil(res.Problems), Warnings: nonNil(res.Warnings)}
		if verr != nil {
			rep := failure.As(verr).Report()
			out.Error = &rep
		} else {
			out.Manifest = res.Manifest
		}
		if err := f.WriteJSON(out); err != nil {
			return err
		}
		if verr != nil {
			return &factory.Reported{Err: failure.As(verr)}
		}
		return nil
	}
	f.PrintWarnings(res.Warnings)
	if verr != nil {
		return verr
	}
	if !f.IO.Quiet() {
		fmt.Fprintf(f.IO.Out, "%s %s: %s\n", f.IO.Color(iostreams.Green, "valid"), file, summary(res.Manifest))
	}
	return nil
}

func summary(m *manifest.Manifest) string {
	var parts []string
	for _, n := range manifest.StartOrder(m.Services) {
		s := m.Services[n]
		p := fmt.Sprintf("%s (%s", n, s.Kind)
		if s.Replicas > 1 {
			p += fmt.Sprintf(" x%d", s.Replicas)
		}
		parts = append(parts, p+")")
	}
	noun := "services"
	if len(parts) == 1 {
		noun = "service"
	}
	return fmt.Sprintf("%s on %s, %d %s in start order: %s", m.Name, m.Runtime.Provider, len(parts), noun, strings.Join(parts, ", "))
}

func nonNil(ps []manifest.Problem) []manifest.Problem {
	if ps == nil {
		return []manifest.Problem{}
	}
	return ps
}
