// Package sidecar implements the hidden `af sidecar --config FILE`: the entry point of the
// engine image in an environment's sidecar pod.
package sidecar

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	sc "github.com/antifailure/af/sidecar"
	"github.com/antifailure/af/sidecar/config"
)

// NewCmdSidecar returns `af sidecar`.
func NewCmdSidecar(f *factory.Factory) *cobra.Command {
	var file string
	var grace time.Duration
	cmd := &cobra.Command{
		Use:    "sidecar --config FILE",
		Short:  "Run the environment's egress sidecar (the engine image's entry point)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Long: `Runs the egress sidecar: DNS (the environment's only resolver), the explicit proxy,
the transparent HTTP and TLS listeners, SMTP capture, and the control endpoint. Every decision
is written to standard output as one JSON line. It stops on SIGTERM, letting requests in
flight finish for --grace.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return failure.Newf(failure.UsageInvalid, "--config is required")
			}
			cfg, err := config.Load(file)
			if err != nil {
				return failure.New(failure.SidecarConfigInvalid, "", err)
			}
			if err := sc.Run(cmd.Context(), cfg, f.IO.Out, f.IO.ErrOut, grace); err != nil {
				var inv *config.Invalid
				if errors.As(err, &inv) {
					return failure.New(failure.SidecarConfigInvalid, "", err)
				}
				return failure.New(failure.SidecarListen, "", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "config", "", "the sidecar configuration file (YAML or JSON)")
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long requests in flight may finish on shutdown")
	return cmd
}
