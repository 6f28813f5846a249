package runtimetest

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"

	afruntime "github.com/antifailure/af/runtime"
	"github.com/antifailure/af/sidecar/control"
	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/inbox"
)

// Observed is a Fake with a sidecar: its links reach the sidecar's real control API (the
// sidecar's own handler over its own decision log and inbox) on loopback, for the tests of af
// net log and af inbox.
type Observed struct {
	*Fake
	Log *decisionlog.Log
	Box *inbox.Store
	// Services maps a service to the loopback host:port its link reaches.
	Services map[string]string
	// Pods are the instances Instances reports (set before the command runs, or under SetPods).
	Pods []afruntime.Instance

	mu    sync.Mutex
	addr  string
	links int
}

var _ afruntime.Observer = (*Observed)(nil)

// Observer is the Observed itself.
func (o *Observed) Observer() afruntime.Observer { return o }

// NewObserved returns an Observed with an empty log and inbox, declaring NetLog.
func NewObserved() *Observed {
	return &Observed{Fake: &Fake{Caps: afruntime.Capabilities{NetLog: true}}, Log: decisionlog.New("shop-pr-7", 1000, nil), Box: inbox.NewStore(100, 1<<20)}
}

// Sidecar serves the control API on a loopback port until the link is closed.
func (o *Observed) Sidecar(_ context.Context, ref afruntime.Ref) (*afruntime.Link, error) {
	o.record(Call{Method: "Sidecar", Ref: ref})
	srv := httptest.NewServer(control.Handler(o.Log, o.Box, nil))
	addr := strings.TrimPrefix(srv.URL, "http://")
	o.mu.Lock()
	o.addr, o.links = addr, o.links+1
	o.mu.Unlock()
	return afruntime.NewLink(addr, "loopback", func() error {
		srv.Close()
		o.mu.Lock()
		o.links--
		o.mu.Unlock()
		return nil
	}), nil
}

// Service reaches Services[service] (a loopback host:port the test serves) until closed.
func (o *Observed) Service(_ context.Context, ref afruntime.Ref, service string, port int) (*afruntime.Link, error) {
	o.record(Call{Method: "Service", Ref: ref})
	addr, ok := o.Services[service]
	if !ok {
		return nil, errors.New("runtimetest.Observed: no service " + service)
	}
	return afruntime.NewLink(addr, "loopback", func() error { return nil }), nil
}

// Instances returns Pods: what the test says is running.
func (o *Observed) Instances(_ context.Context, ref afruntime.Ref) ([]afruntime.Instance, error) {
	o.record(Call{Method: "Instances", Ref: ref})
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]afruntime.Instance(nil), o.Pods...), nil
}

// Logs is not what Observed is for.
func (o *Observed) Logs(context.Context, afruntime.Ref, afruntime.LogOptions, io.Writer) error {
	return errors.New("runtimetest.Observed has no service logs")
}

// SetPods replaces the instances while a command runs (a replacement pod in a follow).
func (o *Observed) SetPods(p []afruntime.Instance) {
	o.mu.Lock()
	o.Pods = p
	o.mu.Unlock()
}

// Links returns how many links are open, and the address of the last one.
func (o *Observed) Links() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.links, o.addr
}
