package node

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
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

// saveAttempts bounds how often saveRules reads a table that keeps changing under it.
const saveAttempts = 10

// tornRead is what iptables-save says when a set a rule names was destroyed while it read.
const tornRead = "in kernel doesn't exist"

// saveRules returns the rules of one table as tool (iptables-save or ip6tables-save) prints
// them. A rule that matches an ipset names it by the set's index in the kernel, and the tool
// asks for the set's name after it has read the rules: when the enforcer deletes such a rule
// and destroys its set in between (kube-router does as namespaces go away), the tool fails with
// "Set with index N in kernel doesn't exist". That is a torn read, not a state of the node, so
// it is read again; any other failure is returned at once.
func saveRules(ctx context.Context, tool, table string) (string, error) {
	var err error
	for range saveAttempts {
		var out string
		if out, err = run(ctx, tool, "-t", table); err == nil || !strings.Contains(err.Error(), tornRead) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w (while reading again: %w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return "", fmt.Errorf("%w (read %d times; its ipsets changed under every read)", err, saveAttempts)
}
