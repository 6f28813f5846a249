// Package status implements `af status`: each service's ready and desired instances and the
// size read off its running pods, and the environment's probe verdict.
package status

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/cmd/up"
	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	afruntime "github.com/antifailure/af/runtime"
)

// NewCmdStatus returns `af status`.
func NewCmdStatus(f *factory.Factory) *cobra.Command {
	var fl envtarget.Flags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show each service's ready instances and applied size, and the probe's verdict",
		Long: `Reads the environment as it runs now: per service, ready/desired instances, the CPU and
memory read off the running pods (not the spec that was sent), the last exit code of a service
that exited, and the verdict of the environment's probe. An environment that does not exist
is reported as such, with exit 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, ref, err := fl.Resolve(f)
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
			write(f, st)
			return nil
		},
	}
	fl.Add(cmd)
	return cmd
}

func write(f *factory.Factory, st *afruntime.Status) {
	w := f.IO.Out
	if !st.Exists {
		fmt.Fprintf(w, "environment %s: not running (no namespace %s)\n", st.Environment, st.Namespace)
		return
	}
	fmt.Fprintf(w, "environment %s in namespace %s", st.Environment, st.Namespace)
	if st.ExpiresAt != nil {
		fmt.Fprintf(w, ", expires %s", st.ExpiresAt.Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintln(w)
	urls := map[string]string{}
	for _, s := range st.Services {
		if s.URL != "" {
			urls[s.Name] = s.URL
		}
	}
	if st.Probe != nil {
		up.Write(w, &afruntime.Result{Probe: st.Probe, Services: st.Services, URLs: urls})
		return
	}
	fmt.Fprintln(w, "probe: no verdict recorded")
	up.WriteServices(w, st.Services)
}
