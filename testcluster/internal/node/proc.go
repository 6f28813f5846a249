package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one long-running program of the cluster.
type process struct {
	name  string   // pid and log file name
	argv  []string // argv[0] may be a name the binary dispatches on
	path  string   // the file to execute
	env   []string // extra environment
	netns string   // run inside this named network namespace, if set
}

// start launches p in its own session, detached from this process, with its
// output in the log directory and its pid in the pid directory.
func (c *Cluster) start(p process) error {
	if err := os.MkdirAll(c.dirs.Logs(), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	if err := os.MkdirAll(c.dirs.Pids(), 0o755); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	logf, err := os.OpenFile(filepath.Join(c.dirs.Logs(), p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	defer logf.Close()
	path, argv := p.path, p.argv
	if p.netns != "" {
		ipPath, err := exec.LookPath("ip")
		if err != nil {
			return fmt.Errorf("start %s: %w", p.name, err)
		}
		argv = append([]string{"ip", "netns", "exec", p.netns, p.path}, p.argv[1:]...)
		path = ipPath
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Stdout: logf, Stderr: logf, Env: append(os.Environ(), p.env...)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	fmt.Fprintf(logf, "=== %s %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := os.WriteFile(filepath.Join(c.dirs.Pids(), p.name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	c.logf("started %s (pid %d)", p.name, pid)
	return nil
}

// running reports whether the process named name (by pid file) is alive.
func (c *Cluster) running(name string) bool {
	pid, err := readPid(filepath.Join(c.dirs.Pids(), name+".pid"))
	return err == nil && alive(pid)
}

// processHasArg reports whether the process named runs with arg among its arguments.
func (c *Cluster) processHasArg(name, arg string) bool {
	pid, err := readPid(filepath.Join(c.dirs.Pids(), name+".pid"))
	if err != nil || !alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return slices.Contains(strings.Split(string(b), "\x00"), arg)
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie has exited; its state letter follows the command in parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// waitFor polls check until it returns nil, ctx ends or the named process dies.
func (c *Cluster) waitFor(ctx context.Context, what, proc string, timeout time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = check(ctx); last == nil {
			return nil
		}
		if proc != "" && !c.running(proc) {
			return fmt.Errorf("%s: %s exited (see %s): %w", what, proc, filepath.Join(c.dirs.Logs(), proc+".log"), last)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: not ready after %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// apiServerGrace is how long RestartAPIServer lets kube-apiserver shut down before killing it.
const apiServerGrace = 3 * time.Second

// RestartAPIServer stops kube-apiserver, waits downFor with it stopped, starts it again with the
// same flags and waits until it is ready: a test of what survives the control plane going away.
// It stops listening at once on SIGTERM and is killed after apiServerGrace: its graceful
// shutdown took 26 s here, and the longer the outage the longer the namespace controller's
// retries back off afterwards (a namespace whose deletion spanned a 38 s outage took 80 s more).
func (c *Cluster) RestartAPIServer(ctx context.Context, downFor time.Duration) error {
	p := c.apiserver()
	pid := c.stop(p.name, apiServerGrace)
	if pid == 0 {
		return fmt.Errorf("restart %s: it is not running", p.name)
	}
	c.logf("stopped %s (pid %d)", p.name, pid)
	select {
	case <-time.After(downFor):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.start(p); err != nil {
		return err
	}
	return c.waitFor(ctx, p.name, p.name, 2*time.Minute, func(ctx context.Context) error {
		_, err := c.Kubectl(ctx, "", "get", "--raw", "/readyz")
		return err
	})
}

// stop asks the process named name (by pid file) to stop, kills it after grace, and returns its
// pid (0 when it was not running).
func (c *Cluster) stop(name string, grace time.Duration) int {
	pid, err := readPid(filepath.Join(c.dirs.Pids(), name+".pid"))
	if err != nil || !alive(pid) {
		return 0
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return pid
}
