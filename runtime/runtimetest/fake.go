// Package runtimetest is a runtime.Runtime that places nothing: it records what it is asked
// and answers what the test set. Command tests (af up, down, status; the action; the App) use
// it to check what they ask of a runtime and what they make of its answers, without a
// cluster. It is imported by tests only; the af binary never links it.
package runtimetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// Call is one call the fake received.
type Call struct {
	Method string // Up, Down, Status, Inventory, Environments
	Ref    afruntime.Ref
	Spec   afruntime.Spec // for Up
}

// Fake answers with its fields; the zero value answers every call with success and empty
// results.
type Fake struct {
	Caps afruntime.Capabilities

	UpResult *afruntime.Result
	UpErr    error
	// UpBlocks makes Up wait until its context ends before it answers: a run that times out or
	// is cancelled.
	UpBlocks bool
	// Taken are environment ids whose namespace another repository's environment holds (id ->
	// that repository): Up of one of them for another repository fails as the kubernetes
	// runtime does.
	Taken        map[string]string
	DownErr      error
	StatusResult *afruntime.Status
	StatusErr    error
	Resources    []afruntime.Resource
	// Envs are the environments Environments lists; Down removes the one it names (unless
	// DownErr).
	Envs []afruntime.Environment
	// CheckResult and CheckErr are what Check answers; with both nil the fake offers no
	// Checker.
	CheckResult *afruntime.Check
	CheckErr    error

	mu    sync.Mutex
	calls []Call
}

var _ afruntime.Runtime = (*Fake)(nil)

// Name is "fake".
func (f *Fake) Name() string { return "fake" }

// Capabilities returns Caps.
func (f *Fake) Capabilities() afruntime.Capabilities { return f.Caps }

func (f *Fake) record(c Call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

// Calls returns the calls so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Up records spec and returns UpResult (or one naming the environment) and UpErr.
func (f *Fake) Up(ctx context.Context, spec afruntime.Spec) (*afruntime.Result, error) {
	f.record(Call{Method: "Up", Ref: spec.Ref, Spec: spec})
	if f.UpBlocks {
		<-ctx.Done()
	}
	if owner, ok := f.Taken[spec.ID]; ok && !strings.EqualFold(owner, spec.Repository) {
		return nil, failure.New(failure.NamespaceNotOurs, fmt.Sprintf("namespace %q belongs to an environment of repository %s, not %s", "fake-"+spec.ID, owner, spec.Repository), afruntime.ErrOtherRepository)
	}
	res := f.UpResult
	if res == nil && f.UpErr == nil {
		res = &afruntime.Result{Environment: spec.ID, Namespace: "fake-" + spec.ID}
	}
	return res, f.UpErr
}

// Down records ref and returns DownErr; without it, ref's environment leaves Envs.
func (f *Fake) Down(_ context.Context, ref afruntime.Ref) error {
	f.record(Call{Method: "Down", Ref: ref})
	if f.DownErr != nil {
		return f.DownErr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Envs = slices.DeleteFunc(f.Envs, func(e afruntime.Environment) bool {
		return e.Namespace == ref.Namespace || (ref.Namespace == "" && e.ID == ref.ID)
	})
	return nil
}

// Environments lists Envs that pass f (the repository compared without case).
func (f *Fake) Environments(_ context.Context, flt afruntime.Filter) ([]afruntime.Environment, error) {
	f.record(Call{Method: "Environments"})
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []afruntime.Environment
	for _, e := range f.Envs {
		if (flt.Repository == "" || strings.EqualFold(flt.Repository, e.Repository)) && (flt.PullRequest == 0 || flt.PullRequest == e.PullRequest) {
			out = append(out, e)
		}
	}
	return out, nil
}

// Reachable answers nil: the fake is always there.
func (f *Fake) Reachable(context.Context) error { return nil }

// Lister: the fake lists Envs.
func (f *Fake) Lister() afruntime.Lister { return f }

// Watcher: the fake reads its environments' watch.
func (f *Fake) Watcher() afruntime.Watcher { return f }

// Observer: a bare Fake observes nothing (an Observed does).
func (f *Fake) Observer() afruntime.Observer { return nil }

// Checker returns the fake when it has a check to answer, else nil.
func (f *Fake) Checker() afruntime.Checker {
	if f.CheckResult == nil && f.CheckErr == nil {
		return nil
	}
	return f
}

// Check records the call and answers CheckResult, CheckErr.
func (f *Fake) Check(context.Context, afruntime.CheckOptions) (*afruntime.Check, error) {
	f.record(Call{Method: "Check"})
	return f.CheckResult, f.CheckErr
}

// Watch records ref and answers from StatusResult's watch, else absent: the fake runs no probe.
func (f *Fake) Watch(_ context.Context, ref afruntime.Ref) (*afruntime.Watch, error) {
	f.record(Call{Method: "Watch", Ref: ref})
	if f.StatusResult != nil && f.StatusResult.Watch != nil {
		return f.StatusResult.Watch, nil
	}
	return &afruntime.Watch{State: afruntime.WatchAbsent, Detail: "the fake runs no probe"}, nil
}

// Status records ref and returns StatusResult (or an absent environment) and StatusErr.
func (f *Fake) Status(_ context.Context, ref afruntime.Ref) (*afruntime.Status, error) {
	f.record(Call{Method: "Status", Ref: ref})
	if f.StatusErr != nil {
		return nil, f.StatusErr
	}
	if f.StatusResult != nil {
		return f.StatusResult, nil
	}
	return &afruntime.Status{Environment: ref.ID, Namespace: fmt.Sprintf("fake-%s", ref.ID)}, nil
}

// Inventory returns Resources.
func (f *Fake) Inventory(context.Context) ([]afruntime.Resource, error) {
	f.record(Call{Method: "Inventory"})
	return f.Resources, nil
}
