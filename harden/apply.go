package harden

import (
	"context"
	"fmt"
	"strings"
)

// Runner runs one of the node's own programs (iptables, ip6tables, nft) and returns its
// standard output, or an error holding its standard error. The agent's runs them in the
// node's root (their backend, legacy or nft, is the node's); tests run them on the test
// cluster's node.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (string, error)
}

// absent is true for iptables' ways of saying there was nothing to delete or check. iptables-nft
// 1.8 says a chain that does not exist "is incompatible" to -S.
func absent(err error) bool {
	for _, s := range []string{"No chain", "does a matching rule exist", "Bad rule", "does not exist", "doesn't exist", "is incompatible"} {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

func (r Rule) jump(j []string) []string { return append(append([]string{}, j...), "-j", r.Chain) }

// Present reports whether the rule is in place as Apply puts it: the chain holding exactly its
// rules (as many, each found by iptables' own comparison), and every jump to it. When it is
// not, it says what differs.
func Present(ctx context.Context, run Runner, r Rule) (bool, string, error) {
	out, err := run.Run(ctx, r.Tool, "-w", "-S", r.Chain)
	if err != nil {
		if absent(err) {
			return false, "no chain " + r.Chain, nil
		}
		return false, "", fmt.Errorf("%s -S %s: %w", r.Tool, r.Chain, err)
	}
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			n++
		}
	}
	if n != len(r.Rules) {
		return false, fmt.Sprintf("chain %s holds %d rules, not af's %d", r.Chain, n, len(r.Rules)), nil
	}
	for _, x := range r.Rules {
		if _, err := run.Run(ctx, r.Tool, append([]string{"-w", "-C", r.Chain}, x...)...); err != nil {
			if absent(err) {
				return false, fmt.Sprintf("chain %s lacks the rule %s", r.Chain, strings.Join(x, " ")), nil
			}
			return false, "", fmt.Errorf("%s -C %s: %w", r.Tool, r.Chain, err)
		}
	}
	for _, j := range r.Jumps {
		if _, err := run.Run(ctx, r.Tool, append([]string{"-w", "-C"}, r.jump(j)...)...); err != nil {
			if absent(err) {
				return false, fmt.Sprintf("no jump to %s from %s", r.Chain, j[0]), nil
			}
			return false, "", fmt.Errorf("%s -C %s: %w", r.Tool, j[0], err)
		}
	}
	return true, "", nil
}

// Apply puts the rule in place: the chain made (or emptied) with its rules, and each jump
// inserted first in its chain when it is not there. It is idempotent.
func Apply(ctx context.Context, run Runner, r Rule) error {
	if _, err := run.Run(ctx, r.Tool, "-w", "-N", r.Chain); err != nil && !strings.Contains(err.Error(), "exists") {
		return fmt.Errorf("add chain %s (%s): %w", r.Chain, r.Tool, err)
	}
	if _, err := run.Run(ctx, r.Tool, "-w", "-F", r.Chain); err != nil {
		return fmt.Errorf("empty chain %s (%s): %w", r.Chain, r.Tool, err)
	}
	for _, x := range r.Rules {
		if _, err := run.Run(ctx, r.Tool, append([]string{"-w", "-A", r.Chain}, x...)...); err != nil {
			return fmt.Errorf("add a rule to %s (%s): %w", r.Chain, r.Tool, err)
		}
	}
	for _, j := range r.Jumps {
		if _, err := run.Run(ctx, r.Tool, append([]string{"-w", "-C"}, r.jump(j)...)...); err == nil {
			continue
		}
		if _, err := run.Run(ctx, r.Tool, append([]string{"-w", "-I", j[0], "1"}, r.jump(j)[1:]...)...); err != nil {
			return fmt.Errorf("jump to %s from %s (%s): %w", r.Chain, j[0], r.Tool, err)
		}
	}
	return nil
}

// Remove takes chain out of tool: every jump to it from a built-in chain, then the chain. A
// chain that is not there is no error.
func Remove(ctx context.Context, run Runner, tool, chain string) error {
	out, err := run.Run(ctx, tool, "-w", "-S")
	if err != nil {
		return fmt.Errorf("%s -S: %w", tool, err)
	}
	for _, l := range strings.Split(out, "\n") {
		fs := strings.Fields(l)
		if len(fs) < 4 || fs[0] != "-A" || fs[len(fs)-2] != "-j" || fs[len(fs)-1] != chain {
			continue
		}
		if _, err := run.Run(ctx, tool, append([]string{"-w", "-D"}, fs[1:]...)...); err != nil && !absent(err) {
			return fmt.Errorf("remove the jump to %s from %s (%s): %w", chain, fs[1], tool, err)
		}
	}
	if _, err := run.Run(ctx, tool, "-w", "-F", chain); err != nil && !absent(err) {
		return fmt.Errorf("empty chain %s (%s): %w", chain, tool, err)
	}
	if _, err := run.Run(ctx, tool, "-w", "-X", chain); err != nil && !absent(err) {
		return fmt.Errorf("remove chain %s (%s): %w", chain, tool, err)
	}
	return nil
}

// RemoveAll takes every chain af may add out of both families.
func RemoveAll(ctx context.Context, run Runner) error {
	for _, tool := range []string{"iptables", "ip6tables"} {
		for _, c := range Chains {
			if err := Remove(ctx, run, tool, c); err != nil {
				return err
			}
		}
	}
	return nil
}
