// Package cmdtest runs one af command the way its tests need: a Factory over buffers, a fake
// environment, a manifest file, and a fake runtime (runtime/runtimetest). Imported by the
// commands' tests only.
package cmdtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// Manifest is a valid manifest of two image services.
const Manifest = `name: shop
runtime:
  provider: kubernetes
services:
  web:
    image: shop/web:1.0
    port: 8080
    depends_on: [api]
  api:
    image: shop/api:1.0
    replicas: 2
`

// Run is one run of a command.
type Run struct {
	Out, ErrOut string
	Err         error
}

// Env is what a run starts from.
type Env struct {
	Manifest string            // the af.yaml content (default Manifest)
	Vars     map[string]string // af's environment
	JSON     bool              // -o json
	Runtime  afruntime.Runtime // the runtime every manifest gets (a *runtimetest.Fake, or one around it)
	Ctx      context.Context   // the command's context (default: one that never ends)
}

// Exec builds the command with newCmd over a Factory made from e, runs it with args and
// returns what it wrote and its error.
func Exec(t *testing.T, e Env, newCmd func(*factory.Factory) *cobra.Command, args ...string) Run {
	t.Helper()
	content := e.Manifest
	if content == "" {
		content = Manifest
	}
	path := filepath.Join(t.TempDir(), "af.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := iostreams.Test()
	ios.SetJSON(e.JSON)
	f := factory.New(ios, func(k string) string { return e.Vars[k] })
	f.Options.File = path
	if e.JSON {
		f.Options.Output = factory.OutputJSON
	}
	if e.Runtime != nil {
		f.Runtime = func(*manifest.Manifest) (afruntime.Runtime, error) { return e.Runtime, nil }
	}
	cmd := newCmd(f)
	cmd.SetArgs(args)
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	ctx := e.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	err := cmd.ExecuteContext(ctx)
	return Run{Out: out.String(), ErrOut: errOut.String(), Err: err}
}
