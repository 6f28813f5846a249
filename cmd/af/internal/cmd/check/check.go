// Package check implements `af check`: can af run on the cluster of the current context, and
// if not, what closes each hole.
package check

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/envtarget"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/render"
	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/settings"
)

// NewCmdCheck returns `af check`.
func NewCmdCheck(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Try whether the cluster contains af's environments, and say what closes each hole",
		Long: `Runs af up's own steps up to the probe's verdict in a throwaway namespace
(<prefix>af-check-<random>, removed when the check ends, expiring in an hour if it is
interrupted): the namespace with af's default-deny NetworkPolicies, the egress sidecar, and
the probe under exactly a service's rules, trying every route out (public TCP and DNS, the
metadata address, the API server, the IPv6 link-local segment, the node's ports). No
application image runs. It needs only the rights af's CI identity has (deploy/ci), and the
probe's targets are af's settings (AF_GATE_*, docs/settings.md).

Beside the verdict it prints what it read of the cluster (the Kubernetes version, the nodes
and their pods' address families, the enforcer, the ingress controller, deploy/harden's
reports) and, for each route that got out, the hole it shows and the fix that fits the
enforcer found: the command or manifest, often deploy/harden.

Exit status 0 when every route is denied; otherwise AF-RUN-059 (exit 4), or the failure that
stopped the check before a verdict. -o json prints the whole check (docs/runtime.md, "af
check").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := runtimeFor(f)
			if err != nil {
				return err
			}
			checker := rt.Checker()
			if checker == nil {
				return failure.Newf(failure.RuntimeCannot, "the %s runtime cannot check its place", rt.Name())
			}
			c, err := checker.Check(cmd.Context(), afruntime.CheckOptions{})
			if err != nil {
				return err
			}
			verdict := verdictError(c)
			if f.IO.JSON() {
				if werr := f.WriteJSON(jsonOf(c)); werr != nil {
					return werr
				}
				if verdict != nil {
					fe := failure.As(verdict)
					if fe == nil {
						fe = failure.New(failure.CheckNotContained, verdict.Error(), verdict)
					}
					return &factory.Reported{Err: fe}
				}
				return nil
			}
			Write(f.IO.Out, c)
			return verdict
		},
	}
}

// runtimeFor is the runtime of the current context: the factory's (tests) or af's settings'.
func runtimeFor(f *factory.Factory) (afruntime.Runtime, error) {
	if f.Runtime != nil {
		return f.Runtime(nil)
	}
	return settings.Runtime(f.Getenv, "", f.Options.Context, envtarget.Progress(f))
}

// verdictError is the check's failure, nil when contained: the failure that stopped it before
// a verdict (an image the cluster cannot pull, a credential refused), else AF-RUN-059.
func verdictError(c *afruntime.Check) error {
	switch {
	case c.Contained():
		return nil
	case c.Probe == nil && c.Err != nil:
		return c.Err
	case c.Probe == nil:
		return failure.Newf(failure.CheckNotContained, "the check reached no verdict: %s", c.Error)
	}
	var routes []string
	for _, a := range c.Advice {
		routes = append(routes, a.Routes...)
	}
	what := c.Probe.Verdict
	if len(routes) > 0 {
		what = "open routes: " + strings.Join(routes, ", ")
	} else if c.Probe.Reason != "" {
		what += ": " + c.Probe.Reason
	}
	return failure.Newf(failure.CheckNotContained, "the probe in the check's namespace %s was not contained (%s); each route's fix is printed above", c.Namespace, what)
}

// checkJSON is af check's JSON: the check and its one-word answer.
type checkJSON struct {
	Contained bool `json:"contained"`
	*afruntime.Check
}

func jsonOf(c *afruntime.Check) checkJSON { return checkJSON{Contained: c.Contained(), Check: c} }

// Write prints the check for people: where, what was read, the verdict and its routes, and
// each hole with its fix.
func Write(w io.Writer, c *afruntime.Check) {
	removed := "removed"
	if !c.Removed {
		removed = "NOT removed: af reap or kubectl delete namespace " + c.Namespace
	}
	fmt.Fprintf(w, "context %q (%s), check namespace %s (%s)\n", c.Context, c.Server, c.Namespace, removed)
	fmt.Fprintln(w, "cluster:")
	rows := [][]string{}
	for _, fa := range c.Cluster {
		rows = append(rows, []string{fa.Name, fa.Value, "(" + fa.From + ")"})
	}
	render.Table(w, "  ", rows)
	if c.Probe == nil {
		fmt.Fprintf(w, "no verdict: %s\n", c.Error)
		return
	}
	render.Probe(w, c.Probe)
	if c.Contained() {
		fmt.Fprintln(w, "contained: every route denied; af up can run here")
		return
	}
	for i, a := range c.Advice {
		fmt.Fprintf(w, "%d. open: %s (%s)\n   why:  %s\n   fix:  %s\n", i+1, strings.Join(a.Routes, ", "), strings.Join(a.Targets, ", "), a.Hole, a.Fix)
	}
}
