package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// removeChains deletes, in each iptables table, the rules that jump to a
// Kubernetes, kube-router or CNI chain, then those chains themselves; other
// rules are left alone. Tables left empty by this are deleted from nftables.
func removeChains(ctx context.Context) error {
	var errs []error
	for _, fam := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			if err := removeTableChains(ctx, fam, table); err != nil {
				errs = append(errs, err)
			}
		}
	}
	errs = append(errs, deleteEmptyIptablesTables(ctx))
	return errors.Join(errs...)
}

func removeTableChains(ctx context.Context, fam, table string) error {
	return removeTableChainsOf(ctx, fam, table, isOurChain)
}

// removeTableChainsOf removes the chains ours names in one table, and the rules elsewhere that
// jump to them.
func removeTableChainsOf(ctx context.Context, fam, table string, ours func(string) bool) error {
	save, err := saveRules(ctx, fam+"-save", table)
	if err != nil || !strings.Contains(save, "*"+table) {
		return nil // the table does not exist
	}
	var deletes, chains []string
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			if name := strings.Fields(line[1:])[0]; ours(name) {
				chains = append(chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) > 1 && !ours(f[1]) && jumpsTo(f, ours) {
				deletes = append(deletes, "-D"+line[2:])
			}
		}
	}
	if len(deletes) == 0 && len(chains) == 0 {
		return nil
	}
	var script strings.Builder
	script.WriteString("*" + table + "\n")
	for _, d := range deletes {
		script.WriteString(d + "\n")
	}
	for _, c := range chains {
		script.WriteString("-F " + c + "\n")
	}
	for _, c := range chains {
		script.WriteString("-X " + c + "\n")
	}
	script.WriteString("COMMIT\n")
	if _, err := runInput(ctx, script.String(), fam+"-restore", "--noflush"); err != nil {
		return fmt.Errorf("remove %s %s chains: %w", fam, table, err)
	}
	return nil
}

func jumpsTo(fields []string, ours func(string) bool) bool {
	for i := 0; i+1 < len(fields); i++ {
		if (fields[i] == "-j" || fields[i] == "-g") && ours(fields[i+1]) {
			return true
		}
	}
	return false
}

// deleteEmptyIptablesTables deletes the nftables tables iptables-nft made for
// filter, nat, mangle and raw when no rule is left in them.
func deleteEmptyIptablesTables(ctx context.Context) error {
	var errs []error
	for _, fam := range []string{"ip", "ip6"} {
		for _, table := range []string{"filter", "nat", "mangle", "raw"} {
			out, err := run(ctx, "nft", "-a", "list", "table", fam, table)
			if err != nil {
				continue // no such table
			}
			if strings.Contains(out, "# handle") && hasRule(out) {
				continue
			}
			if _, err := run(ctx, "nft", "delete", "table", fam, table); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// hasRule reports whether an `nft -a list table` listing holds any rule: a
// line with a handle that is not a table, chain or set header.
func hasRule(listing string) bool {
	for _, line := range strings.Split(listing, "\n") {
		t := strings.TrimSpace(line)
		if !strings.Contains(t, "# handle") {
			continue
		}
		if strings.HasPrefix(t, "table ") || strings.HasPrefix(t, "chain ") || strings.HasPrefix(t, "set ") || strings.HasPrefix(t, "map ") {
			continue
		}
		return true
	}
	return false
}
