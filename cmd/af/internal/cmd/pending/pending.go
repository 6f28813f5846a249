// Package pending holds the af commands whose capability has not landed in this build. Each
// says so with AF-RUN-001 and does nothing else: af never pretends. A command leaves this table
// for its own package when its capability lands.
package pending

import (
	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
)

type spec struct {
	// path is the command's words below af: "up", "net log".
	path  []string
	short string
	long  string
	// missing says what has not landed, for the error message.
	missing string
	// manifest: the command reads af.yaml, so a bad manifest is reported first.
	manifest bool
	hidden   bool
}

var specs = []spec{
	{path: []string{"up"}, manifest: true,
		short:   "Bring an environment up: images, namespace, policies, sidecar, probe, services",
		long:    "Creates or converges the environment for this manifest: publishes its images, creates its namespace with default-deny policies and the egress sidecar, proves containment with the probe before any application image runs, then starts the services behind the gate.",
		missing: "the Kubernetes runtime has not landed yet"},
	{path: []string{"down"}, manifest: true,
		short:   "Remove an environment and wait until it is gone",
		missing: "the Kubernetes runtime has not landed yet"},
	{path: []string{"status"}, manifest: true,
		short:   "Show each service's ready instances and applied size, and the probe's verdict",
		missing: "the Kubernetes runtime has not landed yet"},
	{path: []string{"net", "log"}, manifest: true,
		short:   "Show what the environment's sidecar allowed, blocked and captured",
		missing: "reading a sidecar in a running environment needs the Kubernetes runtime, which has not landed yet"},
	{path: []string{"inbox"}, manifest: true,
		short:   "List, read and wait for requests and mail the sidecar captured",
		missing: "reading a sidecar in a running environment needs the Kubernetes runtime, which has not landed yet"},
	{path: []string{"webhook", "trigger"},
		short:   "Send a signed pull_request webhook to the af GitHub App",
		missing: "the GitHub App has not landed yet"},
	{path: []string{"action"}, hidden: true, short: "Run as the GitHub Action", missing: "the GitHub Action has not landed yet"},
	{path: []string{"app"}, hidden: true, short: "Run the GitHub App webhook server", missing: "the GitHub App has not landed yet"},
}

var parentShort = map[string]string{
	"net":     "Inspect what the environment's sidecar decided",
	"webhook": "Work with the af GitHub App's webhooks",
}

// Commands returns the pending commands, with parent commands ("net", "webhook") made for
// multi-word paths.
func Commands(f *factory.Factory) []*cobra.Command {
	var top []*cobra.Command
	parents := map[string]*cobra.Command{}
	for _, s := range specs {
		leaf := newLeaf(f, s)
		if len(s.path) == 1 {
			top = append(top, leaf)
			continue
		}
		parent, ok := parents[s.path[0]]
		if !ok {
			parent = &cobra.Command{
				Use:   s.path[0],
				Short: parentShort[s.path[0]],
				Args:  cobra.NoArgs,
				RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
			}
			parents[s.path[0]] = parent
			top = append(top, parent)
		}
		parent.AddCommand(leaf)
	}
	return top
}

func newLeaf(f *factory.Factory, s spec) *cobra.Command {
	name := "af"
	for _, w := range s.path {
		name += " " + w
	}
	long := s.long
	if long == "" {
		long = s.short + "."
	}
	long += "\n\nNot available in this build: " + s.missing + ". It exits with AF-RUN-001."
	return &cobra.Command{
		Use:    s.path[len(s.path)-1],
		Short:  s.short,
		Long:   long,
		Hidden: s.hidden,
		Args:   cobra.ArbitraryArgs,
		// Flags the future command will take are not refused as unknown: the honest answer to
		// any use of it is that it is not available.
		FParseErrWhitelist: cobra.FParseErrWhitelist{UnknownFlags: true},
		RunE: func(*cobra.Command, []string) error {
			if s.manifest {
				if _, err := f.ValidManifest(); err != nil {
					return err
				}
			}
			return failure.Newf(failure.Unavailable, "%s is not available in this version: %s", name, s.missing)
		},
	}
}
