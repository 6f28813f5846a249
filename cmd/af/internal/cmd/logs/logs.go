// Package logs implements `af logs SERVICE`: a service's log lines through the runtime, every
// instance with its name in front.
package logs

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// NewCmdLogs returns `af logs`.
func NewCmdLogs(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	var o afruntime.LogOptions
	var since string
	cmd := &cobra.Command{
		Use:   "logs SERVICE",
		Short: "Show a service's logs: every instance, its migration, its gate",
		Long: `Prints the log lines of every instance of SERVICE, each prefixed with the instance (pod) that
wrote it. --migration reads the service's migration instead; --gate the startup gate's own lines
(what it checked before the service started); --previous the container that ran before the
current one, which is where a crashed service's last words are. --follow keeps printing until
Ctrl-C; --since 10m and --tail 100 keep the recent lines.

On Kubernetes the lines come through the API server (pods/log in the environment's namespace).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Service = args[0]
			if since != "" {
				d, err := time.ParseDuration(since)
				if err != nil || d <= 0 {
					return failure.Newf(failure.UsageInvalid, "--since %q: a duration like 10m", since)
				}
				o.Since = d
			}
			if o.Tail < 0 {
				return failure.Newf(failure.UsageInvalid, "--tail %d: a number of lines, 0 for all", o.Tail)
			}
			rt, ref, err := fl.Resolve(cmd.Context(), f)
			if err != nil {
				return err
			}
			obs := rt.Observer()
			if obs == nil {
				return failure.Newf(failure.RuntimeCannot, "af logs: the %s runtime cannot read a service's logs", rt.Name())
			}
			return obs.Logs(cmd.Context(), ref, o, f.IO.Out)
		},
	}
	fl.Add(cmd)
	cmd.Flags().BoolVarP(&o.Follow, "follow", "F", false, "keep printing new lines until interrupted")
	cmd.Flags().StringVar(&since, "since", "", "only lines newer than this duration (10m)")
	cmd.Flags().Int64Var(&o.Tail, "tail", 0, "only the last N lines of each instance (0: all)")
	cmd.Flags().BoolVar(&o.Previous, "previous", false, "the previous container of each instance: a crashed one's last lines")
	cmd.Flags().BoolVar(&o.Migration, "migration", false, "the service's migration instead of its instances")
	cmd.Flags().BoolVar(&o.Gate, "gate", false, "the startup gate's own lines")
	return cmd
}
