package node

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// run executes a command and returns its standard output; a failure carries
// the command line and its standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	return runInput(ctx, "", name, args...)
}

func runInput(ctx context.Context, stdin, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}
