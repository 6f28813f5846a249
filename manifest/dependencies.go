package manifest

// What services wait for (depends_on, migrate_after): every name a service of the manifest,
// and no cycle, each cycle reported once with its path.

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/antifailure/af/failure"
)

// dependencies reports every cycle among depends_on, once each (self-dependencies are reported
// where they are listed).
func (v *validator) dependencies(services map[string]*Service) {
	for _, cycle := range findCycles(services) {
		first := cycle[0]
		field, idx := "depends_on", 0
		for i, d := range services[first].DependsOn {
			if d == cycle[1] {
				idx = i
			}
		}
		if !slices.Contains(services[first].DependsOn, cycle[1]) {
			for i, d := range services[first].MigrateAfter {
				if d == cycle[1] {
					field, idx = "migrate_after", i
				}
			}
		}
		v.fail(fmt.Sprintf("%s.%s[%d]", joinKey("services", first), field, idx), failure.DependencyCycle,
			"services depend on each other in a cycle (depends_on and migrate_after): %s", strings.Join(cycle, " -> "))
	}
}

// findCycles returns the dependency cycles among services, each as a path that starts and ends
// at the same service (a -> b -> a), starting at its alphabetically first member.
// Self-dependencies and unknown names are left out.
func findCycles(services map[string]*Service) [][]string {
	names := slices.Sorted(maps.Keys(services))
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var sccs [][]string
	counter := 0
	var strong func(n string)
	strong = func(n string) {
		index[n], low[n] = counter, counter
		counter++
		stack = append(stack, n)
		onStack[n] = true
		for _, d := range deps(services, n) {
			if _, seen := index[d]; !seen {
				strong(d)
				low[n] = min(low[n], low[d])
			} else if onStack[d] {
				low[n] = min(low[n], index[d])
			}
		}
		if low[n] == index[n] {
			var scc []string
			for {
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[top] = false
				scc = append(scc, top)
				if top == n {
					break
				}
			}
			if len(scc) > 1 {
				sccs = append(sccs, scc)
			}
		}
	}
	for _, n := range names {
		if _, seen := index[n]; !seen {
			strong(n)
		}
	}
	var cycles [][]string
	for _, scc := range sccs {
		in := map[string]bool{}
		for _, n := range scc {
			in[n] = true
		}
		sort.Strings(scc)
		cycles = append(cycles, cyclePath(services, scc[0], in))
	}
	sort.Slice(cycles, func(i, j int) bool { return cycles[i][0] < cycles[j][0] })
	return cycles
}

// deps returns n's known dependencies other than itself, sorted: the services it waits for,
// itself (depends_on) or through its migration (migrate_after).
func deps(services map[string]*Service, n string) []string {
	s := services[n]
	if s == nil {
		return nil
	}
	var out []string
	for _, d := range append(append([]string(nil), s.DependsOn...), s.MigrateAfter...) {
		if d != n && services[d] != nil && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// cyclePath finds a path from start back to start inside one strongly connected component.
func cyclePath(services map[string]*Service, start string, in map[string]bool) []string {
	prev := map[string]string{}
	queue := []string{start}
	visited := map[string]bool{start: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range deps(services, n) {
			if !in[d] {
				continue
			}
			if d == start {
				path := []string{start}
				for c := n; c != start; c = prev[c] {
					path = append(path, "")
					copy(path[2:], path[1:])
					path[1] = c
				}
				return append(path, start)
			}
			if !visited[d] {
				visited[d] = true
				prev[d] = n
				queue = append(queue, d)
			}
		}
	}
	return []string{start, start}
}
