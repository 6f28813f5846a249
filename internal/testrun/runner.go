package main

// The runner of the plan: phases one after another, lanes at once, the test cluster always
// taken down at the end, and `testrun test` itself.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// runner runs a plan.
type runner struct {
	out io.Writer
	// env is added to every command's environment (AF_TEST_STRICT, AF_TESTCLUSTER,
	// AF_DOCKER_HOST).
	env []string
	// integration says the test cluster may be up: takeDown runs when the run ends.
	integration bool
	takeDown    func(ctx context.Context)
	// lanePrintEvery is how often together says which lanes still run.
	lanePrintEvery time.Duration
}

// runPlan runs the entries of the stages asked for (all when none), one after another, and
// stops at the first that fails. The test cluster and the container daemon are taken down at
// the end whenever the integration stage began, on a context of their own.
func (r *runner) runPlan(ctx context.Context, entries []entry, stages map[string]bool) (ok bool) {
	defer func() {
		if !r.integration || r.takeDown == nil {
			return
		}
		fmt.Fprintln(r.out, "== taking the test cluster down")
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		r.takeDown(cctx)
	}()
	for _, e := range entries {
		if len(stages) > 0 && !stages[e.stage] {
			continue
		}
		if ctx.Err() != nil {
			fmt.Fprintf(r.out, "== interrupted: %v\n", ctx.Err())
			return false
		}
		if e.stage == stageIntegration {
			r.integration = true
		}
		switch {
		case e.say != "":
			fmt.Fprintf(r.out, "== %s\n", e.say)
		case e.do != nil:
			fmt.Fprintf(r.out, "== %s\n", e.doName)
			if err := e.do(ctx, r); err != nil {
				fmt.Fprintf(r.out, "== FAILED: %s: %v\n", e.doName, err)
				return false
			}
		case e.phase != nil:
			if !r.phase(ctx, *e.phase, r.out) {
				return false
			}
		case len(e.together) > 0:
			if !r.together(ctx, e.together) {
				return false
			}
		}
	}
	return true
}

// phase runs one phase, records it and prints its counts; false when it failed.
func (r *runner) phase(ctx context.Context, p phase, out io.Writer) bool {
	env := append(append([]string(nil), r.env...), p.env...)
	var rec *Phase
	var err error
	if p.kind == "go" {
		rec, err = runGo(ctx, p.name, p.dir, p.verbose, p.args, append(env, "CGO_ENABLED=1"), out)
	} else {
		rec, err = runStep(ctx, p.name, p.report, p.negative, p.args, env, out)
	}
	if err == nil {
		err = save(rec)
	}
	if err != nil {
		fmt.Fprintf(out, "== phase %s could not run: %v\n", p.name, err)
		return false
	}
	printPhase(out, rec)
	return rec.OK
}

// together runs the lanes at once, each into its own buffer, says every lanePrintEvery which
// still run, then prints each lane's output whole, in order; false when any lane failed.
func (r *runner) together(ctx context.Context, lanes []lane) bool {
	names := make([]string, len(lanes))
	for i, l := range lanes {
		names[i] = l.name
	}
	fmt.Fprintf(r.out, "== together: %s (each one's output follows when all have ended)\n", strings.Join(names, " "))
	var mu sync.Mutex
	running := map[string]bool{}
	bufs := make([]strings.Builder, len(lanes))
	oks := make([]bool, len(lanes))
	var wg sync.WaitGroup
	for i, l := range lanes {
		running[l.name] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &lockedWriter{w: &bufs[i]}
			oks[i] = true
			for _, p := range l.phases {
				if !r.phase(ctx, p, w) {
					oks[i] = false
					break
				}
			}
			mu.Lock()
			delete(running, l.name)
			mu.Unlock()
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	start := time.Now()
	tick := time.NewTicker(r.lanePrintEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			mu.Lock()
			var still []string
			for _, n := range names {
				if running[n] {
					still = append(still, n)
				}
			}
			mu.Unlock()
			fmt.Fprintf(r.out, "   ... %ds: still running: %s\n", int(time.Since(start).Seconds()), strings.Join(still, " "))
		}
	}
	all := true
	for i, l := range lanes {
		state := "ok"
		if !oks[i] {
			state, all = "FAILED", false
		}
		fmt.Fprintf(r.out, "---- %s: %s\n", l.name, state)
		io.WriteString(r.out, bufs[i].String())
	}
	return all
}

// command runs a command of the plan that is not a phase.
func (r *runner) command(ctx context.Context, stdout io.Writer, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = stdout, r.out
	cmd.Env = append(append(os.Environ(), r.env...), env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd.Run()
}

// dockerd starts the private container daemon (hack/dockerd.sh) and hands its socket to every
// command after it as AF_DOCKER_HOST.
func (r *runner) dockerd(ctx context.Context) error {
	var out strings.Builder
	if err := r.command(ctx, &out, nil, "./hack/dockerd.sh", "start"); err != nil {
		return fmt.Errorf("hack/dockerd.sh start: %w", err)
	}
	host := strings.TrimSpace(out.String())
	if host == "" {
		return fmt.Errorf("hack/dockerd.sh start printed no DOCKER_HOST")
	}
	r.env = append(r.env, "AF_DOCKER_HOST="+host)
	return nil
}

func (r *runner) dockerdStop(ctx context.Context) error {
	return r.command(ctx, r.out, nil, "./hack/dockerd.sh", "stop")
}

// printPlan writes the plan as it would run: each heading, action and phase with its command.
func printPlan(w io.Writer, entries []entry, stages map[string]bool) {
	line := func(indent string, p phase) {
		cmd := p.args
		if p.kind == "go" {
			cmd = append([]string{"go", "test", "-json"}, p.args...)
			if p.dir != "" {
				cmd = append([]string{"go", "-C", p.dir, "test", "-json"}, p.args...)
			}
		}
		env := ""
		if len(p.env) > 0 {
			env = strings.Join(p.env, " ") + " "
		}
		fmt.Fprintf(w, "%sphase %s: %s%s\n", indent, p.name, env, strings.Join(cmd, " "))
	}
	for _, e := range entries {
		if len(stages) > 0 && !stages[e.stage] {
			continue
		}
		switch {
		case e.say != "":
			fmt.Fprintf(w, "== %s\n", e.say)
		case e.do != nil:
			fmt.Fprintf(w, "do: %s\n", e.doName)
		case e.phase != nil:
			line("", *e.phase)
		default:
			fmt.Fprintln(w, "together:")
			for _, l := range e.together {
				fmt.Fprintf(w, "  %s:\n", l.name)
				for _, p := range l.phases {
					line("    ", p)
				}
			}
		}
	}
}

// runTest is `testrun test`: the whole plan under AF_TEST_STRICT=1 (a missing tool or root
// fails instead of skipping), the phases recorded afresh and summed up at the end; or, with
// stages, only those, each phase judged as it ends.
func runTest(ctx context.Context, stageList, expected string, dry bool, out io.Writer) (int, error) {
	stages := map[string]bool{}
	for _, s := range strings.Split(stageList, ",") {
		switch s = strings.TrimSpace(s); s {
		case "":
		case stageDeps, stageLint, stageUnit, stageIntegration:
			stages[s] = true
		default:
			return 2, fmt.Errorf("-stage %q: deps, lint, unit or integration", s)
		}
	}
	entries := plan()
	if dry {
		printPlan(out, entries, stages)
		return 0, nil
	}
	r := &runner{out: out, lanePrintEvery: time.Minute}
	r.takeDown = func(ctx context.Context) {
		_ = r.command(ctx, r.out, nil, "bin/afcluster", "down")
		_ = r.dockerdStop(ctx)
	}
	if len(stages) > 0 {
		if !r.runPlan(ctx, entries, stages) {
			return 1, nil
		}
		return 0, nil
	}
	exp, err := readExpected(expected)
	if err != nil {
		return 2, err
	}
	if err := os.RemoveAll(resultsDir()); err != nil {
		return 2, err
	}
	r.env = append(r.env, "AF_TEST_STRICT=1")
	status := 0
	if !r.runPlan(ctx, entries, nil) {
		status = 1
	}
	phases, err := load(resultsDir())
	if err != nil {
		return 2, err
	}
	s := summarize(phases, exp)
	s.print(out, status)
	if !s.ok() || status != 0 {
		return 1, nil
	}
	return 0, nil
}
