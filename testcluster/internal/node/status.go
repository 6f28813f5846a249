package node

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Status writes a report of the cluster: its state, each process, the node,
// the system pods and the guard's counters. It returns an error when the
// cluster is not running or a guard counter is not zero.
func (c *Cluster) Status(ctx context.Context, w io.Writer) error {
	st, err := ReadState(c.dirs)
	if err != nil {
		fmt.Fprintln(w, "cluster: not running")
		if left := Leftovers(ctx, c.dirs); len(left) > 0 {
			fmt.Fprintf(w, "leftovers of an earlier cluster (make cluster-down removes them):\n  %s\n", strings.Join(left, "\n  "))
		}
		return fmt.Errorf("the test cluster is not running: %w", err)
	}
	fmt.Fprintf(w, "cluster: started %s, up in %ds, enforcer %s, ingress %t, uplink %s\n", st.Started, st.UpSeconds, st.Enforcer, st.Ingress, st.Uplink)
	var down []string
	fmt.Fprintln(w, "processes:")
	for _, name := range stopOrder {
		pid, err := readPid(c.dirs.Pids() + "/" + name + ".pid")
		if err != nil {
			continue
		}
		state := "running"
		if !alive(pid) {
			state = "EXITED"
			down = append(down, name)
		}
		fmt.Fprintf(w, "  %-24s pid %-7d %s\n", name, pid, state)
	}
	if out, err := c.Kubectl(ctx, "", "get", "nodes,pods", "-A", "-o", "wide"); err == nil {
		fmt.Fprintf(w, "kubernetes:\n%s", indent(out))
	} else {
		fmt.Fprintf(w, "kubernetes: %v\n", err)
	}
	counters, err := GuardCounters(ctx)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(counters))
	for n := range counters {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "guard counters (packets dropped; must be 0):")
	nonzero := false
	for _, n := range names {
		fmt.Fprintf(w, "  %-22s %d\n", n, counters[n])
		nonzero = nonzero || counters[n] != 0
	}
	if nonzero {
		return fmt.Errorf("a guard counter is not zero: something tried to leave the machine")
	}
	if len(down) > 0 {
		return fmt.Errorf("processes exited: %s", strings.Join(down, ", "))
	}
	return nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return "  " + strings.Join(lines, "\n  ") + "\n"
}
