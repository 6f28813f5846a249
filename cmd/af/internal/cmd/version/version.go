// Package version implements `af version`.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/version"
)

// NewCmdVersion returns `af version`.
func NewCmdVersion(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print af's version, commit and platform",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info := version.Get(f.Getenv)
			if f.IO.JSON() {
				return f.WriteJSON(info)
			}
			fmt.Fprintf(f.IO.Out, "af %s (commit %s, %s, %s)\nengine image %s (source digest %s)\n", info.Version, info.Commit, info.GoVersion, info.Platform, info.EngineImage, info.EngineDigest)
			return nil
		},
	}
}
