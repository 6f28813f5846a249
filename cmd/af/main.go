// Command af brings up contained preview environments for pull requests. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	// CA roots for TLS to GitHub and registries where the system has none (the action's image).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/antifailure/af/cmd/af/internal/cmd/root"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/cmd/af/internal/iostreams"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	f := factory.New(iostreams.System(os.Getenv), os.Getenv)
	code := root.Main(ctx, f, os.Args[1:])
	stop()
	os.Exit(code)
}
