// Package status implements `af status`: each service's ready and desired instances and the
// size read off its running pods, the environment's probe verdict, its watch (containment now)
// and its quota.
package status

import (
	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/render"
)

// NewCmdStatus returns `af status`.
func NewCmdStatus(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each service's ready instances and applied size, and the probe's verdict",
		Long: `Reads the environment as it runs now: per service, ready/desired instances, the CPU and
memory read off the running pods (not the spec that was sent), the last exit code of a service
that exited, the verdict of the environment's probe, and what its pods hold against the
namespace's quota (pods, CPU and memory limits, used/hard). An environment that does not exist
is reported as such, with exit 0.

The watch line is containment now: after af up the probe stays and checks every route again
(AF_WATCH_INTERVAL, 1m). It says contained with the time of the last check, NOT CONTAINED with
the routes that got out, or why nothing can say (stale, stopped, absent). In -o json: "watch".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			st, err := rt.Status(cmd.Context(), ref)
			if err != nil {
				return err
			}
			if f.IO.JSON() {
				return f.WriteJSON(st)
			}
			render.Status(f.IO.Out, st)
			return nil
		},
	}
	fl.Add(cmd)
	return cmd
}
