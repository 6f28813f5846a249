// Package down implements `af down`: remove an environment and wait until it is gone.
package down

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
)

// NewCmdDown returns `af down`.
func NewCmdDown(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Remove an environment and wait until it is gone",
		Long: `Deletes the environment's namespace, and everything in it, when af created it (it carries
dev.antifailure.managed=true; any other namespace is refused with AF-RUN-045 and left alone),
then waits until it is gone. If something holds it, the error names the finalizers. Removing an
environment that does not exist succeeds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			start := time.Now()
			if err := rt.Down(cmd.Context(), ref); err != nil {
				return err
			}
			if f.IO.JSON() {
				return f.WriteJSON(map[string]any{"environment": ref.ID, "removed": true, "elapsed_ms": time.Since(start).Milliseconds()})
			}
			f.Infof("environment %s is down (%s)", ref.ID, time.Since(start).Round(100*time.Millisecond))
			return nil
		},
	}
	fl.Add(cmd)
	return cmd
}
