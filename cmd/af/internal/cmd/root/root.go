// Package root assembles the af command tree, parses the global flags, and turns whatever a
// command returns into output and an exit status: results on standard output, failures as
// catalogued errors (text on standard error, or JSON on standard output with -o json).
package root

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	actioncmd "github.com/antifailure/af/cmd/af/internal/cmd/action"
	appcmd "github.com/antifailure/af/cmd/af/internal/cmd/app"
	"github.com/antifailure/af/cmd/af/internal/cmd/check"
	conformancecmd "github.com/antifailure/af/cmd/af/internal/cmd/conformance"
	"github.com/antifailure/af/cmd/af/internal/cmd/down"
	"github.com/antifailure/af/cmd/af/internal/cmd/engineimage"
	gatecmd "github.com/antifailure/af/cmd/af/internal/cmd/gate"
	hardencmd "github.com/antifailure/af/cmd/af/internal/cmd/harden"
	"github.com/antifailure/af/cmd/af/internal/cmd/inbox"
	"github.com/antifailure/af/cmd/af/internal/cmd/logs"
	netcmd "github.com/antifailure/af/cmd/af/internal/cmd/net"
	"github.com/antifailure/af/cmd/af/internal/cmd/reap"
	sidecarcmd "github.com/antifailure/af/cmd/af/internal/cmd/sidecar"
	"github.com/antifailure/af/cmd/af/internal/cmd/status"
	"github.com/antifailure/af/cmd/af/internal/cmd/up"
	"github.com/antifailure/af/cmd/af/internal/cmd/validate"
	versioncmd "github.com/antifailure/af/cmd/af/internal/cmd/version"
	"github.com/antifailure/af/cmd/af/internal/cmd/webhook"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/failure"
)

// NewCmdRoot returns the af command with every subcommand.
func NewCmdRoot(f *factory.Factory) *cobra.Command {
	opts := f.Options
	cmd := &cobra.Command{
		Use:   "af",
		Short: "Preview environments for every pull request, with containment proven on the cluster",
		Long: `af runs one contained preview environment per pull request on Kubernetes.

Each environment is one namespace with default-deny network policies and one egress sidecar
that is its only way out. Before any application image runs, af proves on the cluster in front
of it that the policies are enforced, and refuses to start what it cannot contain.

The manifest is af.yaml at the repository root; run 'af validate' to check it.`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.Output {
			case factory.OutputText, factory.OutputJSON:
			default:
				return failure.Newf(failure.UsageInvalid, "-o %q: the output format is text or json", opts.Output)
			}
			f.IO.SetJSON(opts.Output == factory.OutputJSON)
			f.IO.SetQuiet(opts.Quiet)
			if opts.NoColor || f.Getenv("NO_COLOR") != "" {
				f.IO.SetColor(false)
			}
			return nil
		},
	}
	cmd.SetIn(f.IO.In)
	cmd.SetOut(f.IO.Out)
	cmd.SetErr(f.IO.ErrOut)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return failure.New(failure.UsageInvalid, err.Error(), err)
	})

	pf := cmd.PersistentFlags()
	pf.StringVarP(&opts.File, "file", "f", "af.yaml", "the manifest to read (- for standard input)")
	pf.StringVar(&opts.Context, "context", "", "the kubeconfig context to use when the manifest names none")
	pf.StringVarP(&opts.Output, "output", "o", factory.OutputText, "output format: text or json")
	pf.BoolVarP(&opts.Quiet, "quiet", "q", false, "print results and errors only: no progress, no warnings")
	pf.BoolVar(&opts.NoColor, "no-color", false, "no colour in output (also when NO_COLOR is set)")

	cmd.AddCommand(validate.NewCmdValidate(f))
	cmd.AddCommand(up.NewCmdUp(f), down.NewCmdDown(f), status.NewCmdStatus(f), check.NewCmdCheck(f), hardencmd.NewCmdHarden(f))
	cmd.AddCommand(conformancecmd.NewCmdConformance(f))
	cmd.AddCommand(versioncmd.NewCmdVersion(f))
	cmd.AddCommand(sidecarcmd.NewCmdSidecar(f))
	cmd.AddCommand(gatecmd.NewCmdGate(f), gatecmd.NewCmdProbe(f))
	cmd.AddCommand(engineimage.NewCmdEngineImage(f))
	cmd.AddCommand(actioncmd.NewCmdAction(f))
	cmd.AddCommand(appcmd.NewCmdApp(f), reap.NewCmdReap(f))
	cmd.AddCommand(netcmd.NewCmdNet(f), logs.NewCmdLogs(f), inbox.NewCmdInbox(f), webhook.NewCmdWebhook(f))
	return cmd
}

// Main runs af with args and returns the process exit status.
func Main(ctx context.Context, f *factory.Factory, args []string) int {
	cmd := NewCmdRoot(f)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var reported *factory.Reported
	if errors.As(err, &reported) {
		return reported.Err.Exit()
	}
	fe := failure.As(err)
	if fe == nil {
		// Only cobra itself returns uncatalogued errors: unknown commands, missing arguments.
		fe = failure.New(failure.UsageInvalid, err.Error(), err)
	}
	if f.IO.JSON() || f.Options.Output == factory.OutputJSON || wantsJSON(args) {
		_ = f.WriteJSON(map[string]any{"error": fe.Report()})
		return fe.Exit()
	}
	writeText(f.IO, fe)
	return fe.Exit()
}

// wantsJSON finds -o json in args for failures cobra reports before it has parsed the flags.
func wantsJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-ojson" || a == "--output=json" || a == "-o=json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == "json":
			return true
		}
	}
	return false
}

func writeText(ios *iostreams.IOStreams, fe *failure.Error) {
	var b strings.Builder
	_ = fe.WriteText(&b)
	text := b.String()
	if ios.ColorEnabled() {
		head := fmt.Sprintf("Error %s: %s", fe.Entry.Code, fe.Entry.Title)
		text = ios.Color(iostreams.Red, head) + strings.TrimPrefix(text, head)
	}
	fmt.Fprint(ios.ErrOut, text)
}
