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
	// runtimeRefuses: the manifest's runtime cannot do this (AF-RUN-044, naming it), rather
	// than the command being absent.
	runtimeRefuses bool
}

var specs = []spec{
	{path: []string{"webhook", "trigger"}, manifest: true,
		short:   "Send a signed webhook into the environment, as a provider would",
		missing: "it delivers through a port-forward to the service, which is not built yet (the sidecar's is)", runtimeRefuses: true},
}

var parentShort = map[string]string{
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
				m, err := f.ValidManifest()
				if err != nil {
					return err
				}
				if s.runtimeRefuses && m.Runtime.Provider == "kubernetes" {
					return failure.Newf(failure.RuntimeCannot, "%s: the kubernetes runtime cannot do this yet: %s", name, s.missing)
				}
			}
			return failure.Newf(failure.Unavailable, "%s is not available in this version: %s", name, s.missing)
		},
	}
}
