// Command af brings up contained preview environments for pull requests. See README.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

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
