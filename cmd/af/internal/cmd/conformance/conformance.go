// Package conformance implements `af conformance verify`: the verdict reader over a
// `go test -json` report of the conformance suite.
package conformance

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/conformance/verdict"
	"github.com/antifailure/af/failure"
)

// DefaultPackage is the package whose conformance run is read unless --package names another.
const DefaultPackage = "github.com/antifailure/af/runtime/kubernetes"

// NewCmdConformance returns `af conformance` with its verify subcommand.
func NewCmdConformance(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance",
		Short: "Read conformance reports",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var (
		pkg           string
		noSkip        bool
		expectRefusal bool
		escapes       []string
	)
	verify := &cobra.Command{
		Use:   "verify REPORT.jsonl",
		Short: "Turn a go test -json report of the conformance suite into a claim, or refuse",
		Long: `Accepts the report only when every roster behaviour passed exactly once as a subtest of
the suite's root test, the startup proof passed, no containment behaviour failed or was
skipped, every other skip is a named behaviour with a requirement and a reason, the package
passed, no same-named test of another package is counted, nothing ran twice, and the runtime
ran with its own containment checks. --no-skip refuses any skip at all. Prints the count, or
every reason it refuses (AF-RUN-049). "-" reads standard input.

--expect-refusal reads the report of a negative control instead: a run on a cluster with
known holes, the runtime's own probe and gates off, so that the suite's attempts alone meet
the holes. It holds only when each behaviour named by --escape (default: every behaviour that
tries a route, and the startup proof) failed because a route got out, and every other
behaviour passed: a cluster broken in another way is refused as a negative control.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := f.IO.In
			if args[0] != "-" {
				file, err := os.Open(args[0])
				if err != nil {
					return failure.New(failure.UsageInvalid, "reading the report: "+err.Error(), err)
				}
				defer file.Close()
				in = file
			}
			if len(escapes) > 0 && !expectRefusal {
				return failure.Newf(failure.UsageInvalid, "--escape goes with --expect-refusal")
			}
			var (
				result   fmt.Stringer
				lines    []string
				err      error
				accepted bool
			)
			if expectRefusal {
				if len(escapes) == 0 {
					escapes = verdict.RouteBehaviours()
				}
				var nc *verdict.NegativeClaim
				if nc, err = verdict.VerifyRefusal(in, pkg, escapes); err == nil {
					result, accepted = nc, true
				}
			} else {
				var claim *verdict.Claim
				if claim, err = verdict.Verify(in, pkg); err == nil {
					if noSkip && len(claim.Skipped) > 0 {
						err = &verdict.Refusal{Reasons: []string{fmt.Sprintf("--no-skip: %d behaviour(s) skipped: %v", len(claim.Skipped), claim.SkipReasons)}}
					} else {
						result, accepted, lines = claim, true, claim.SkipReasons
					}
				}
			}
			if !accepted {
				if r, ok := err.(*verdict.Refusal); ok {
					e := failure.Newf(failure.ConformanceRefused, "%s", r.Error())
					if f.IO.JSON() {
						_ = f.WriteJSON(map[string]any{"accepted": false, "reasons": r.Reasons})
						return &factory.Reported{Err: e}
					}
					return e
				}
				return failure.New(failure.UsageInvalid, err.Error(), err)
			}
			if f.IO.JSON() {
				return f.WriteJSON(map[string]any{"accepted": true, "claim": result, "summary": result.String()})
			}
			fmt.Fprintln(f.IO.Out, result.String())
			for _, s := range lines {
				fmt.Fprintln(f.IO.Out, "  skipped "+s)
			}
			return nil
		},
	}
	verify.Flags().StringVar(&pkg, "package", DefaultPackage, "the Go package the suite ran in")
	verify.Flags().BoolVar(&noSkip, "no-skip", false, "refuse a report in which any behaviour was skipped")
	verify.Flags().BoolVar(&expectRefusal, "expect-refusal", false, "the report is a negative control's: require the escapes named, and every other behaviour passed")
	verify.Flags().StringSliceVar(&escapes, "escape", nil, "with --expect-refusal: a behaviour (or the startup proof) that must fail by an escape; repeat or comma-separate (default: every behaviour that tries a route, and the startup proof)")
	cmd.AddCommand(verify, newCmdRoster(f))
	return cmd
}

// newCmdRoster returns `af conformance roster`: the behaviours the suite runs.
func newCmdRoster(f *factory.Factory) *cobra.Command {
	var onlyContainment bool
	cmd := &cobra.Command{
		Use:   "roster",
		Short: "List the behaviours the conformance suite runs",
		Long: `Lists every behaviour of the conformance suite: its name, whether it is a containment
behaviour (which nothing may skip) and whether it tries a route out (",route": a cluster with
holes fails it by an escape), the capability it requires, and what it checks.
--containment prints only the containment behaviours' names, one per line.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var list []verdict.Behaviour
			for _, b := range verdict.Roster {
				if !onlyContainment || b.Containment {
					list = append(list, b)
				}
			}
			if f.IO.JSON() {
				type row struct {
					Name        string `json:"name"`
					Description string `json:"description"`
					Requires    string `json:"requires,omitempty"`
					Containment bool   `json:"containment"`
					Route       bool   `json:"route"`
				}
				rows := []row{}
				for _, b := range list {
					rows = append(rows, row{b.Name, b.Description, string(b.Requires), b.Containment, b.Route})
				}
				return f.WriteJSON(rows)
			}
			for _, b := range list {
				if onlyContainment {
					fmt.Fprintln(f.IO.Out, b.Name)
					continue
				}
				kind, req := "", string(b.Requires)
				if b.Containment {
					kind = "containment"
				}
				if b.Route {
					kind += ",route"
				}
				if req == "" {
					req = "-"
				}
				fmt.Fprintf(f.IO.Out, "%-42s %-17s %-10s %s\n", b.Name, kind, req, b.Description)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&onlyContainment, "containment", false, "only the containment behaviours' names")
	return cmd
}
