// Package action implements `af action`, the entrypoint of af's container GitHub Action
// (action.yml): it hands the job's environment to package action and exits with the status
// of the environment it brought up, took down or read.
package action

import (
	"github.com/spf13/cobra"

	"github.com/antifailure/af/action"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
)

// NewCmdAction returns the hidden `af action`.
func NewCmdAction(f *factory.Factory) *cobra.Command {
	return &cobra.Command{
		Use:    "action",
		Short:  "Run as the GitHub Action (the entrypoint of action.yml)",
		Hidden: true,
		Long: `Runs inside a GitHub Actions job as the af container action: reads the INPUT_* inputs and
the event (GITHUB_EVENT_PATH), and runs up, down or status for the pull request, reporting
on it (one sticky comment, the "af preview" check run, a deployment), in the step summary and
in the step outputs. docs/github.md has the inputs and a workflow to copy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := action.Run(cmd.Context(), action.Deps{Getenv: f.Getenv, Out: f.IO.Out})
			if o.Exit == 0 {
				return nil
			}
			fe := failure.Ensure(o.Err)
			fe.Status = o.Exit
			return &factory.Reported{Err: fe} // the action wrote it as a workflow annotation
		},
	}
}
