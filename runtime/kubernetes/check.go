package kubernetes

// af check: af up's own steps up to the probe's verdict, in a throwaway environment that is
// removed, beside what af can read of the cluster with the rights af-ci has.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/antifailure/af/gate"
	"github.com/antifailure/af/harden"
	"github.com/antifailure/af/manifest"
	afruntime "github.com/antifailure/af/runtime"
)

// CheckPrefix begins every check environment's id; CheckService is its one service, which is
// never started (the probe runs under its rules).
const (
	CheckPrefix  = "af-check-"
	CheckService = "check"
)

// Check runs af up's steps up to the probe's verdict in a throwaway environment
// (af-check-<random>) with one service that is never started, removes it whatever happened,
// and reads what it can of the cluster: nodes and their pod ranges, the enforcer, the ingress
// controller, deploy/harden's reports. An error is returned only when nothing could be tried
// (the cluster unreachable); a check that met a failure on the way says so in Error.
func (r *Runtime) Check(ctx context.Context, o afruntime.CheckOptions) (*afruntime.Check, error) {
	m := manifest.Defaulted[manifest.Manifest]()
	if o.Manifest != nil {
		m.Runtime = o.Manifest.Runtime
	}
	m.Name = "af-check"
	m.Runtime.Domain = "" // no preview URL: the ingress controller is read, not needed
	m.Runtime.TTL = "1h"  // a check interrupted before its removal is reaped within the hour
	m.Egress = manifest.Egress{}
	m.Database = nil
	m.Services = map[string]*manifest.Service{CheckService: {Image: r.opts.EngineImage}}
	var b [4]byte
	_, _ = rand.Read(b[:])
	ref := afruntime.Ref{ID: CheckPrefix + hex.EncodeToString(b[:]), Manifest: &m}
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	c := &afruntime.Check{Context: t.c.context, Server: t.c.server, Namespace: t.ns}
	c.Cluster = r.clusterFacts(ctx, t)
	res, upErr := r.up(ctx, afruntime.Spec{Ref: ref}, true)
	if res != nil {
		c.Probe, c.Phases = res.Probe, res.Phases
	}
	if upErr != nil && (c.Probe == nil || c.Probe.Verdict == gate.Contained) {
		c.Error, c.Err = upErr.Error(), upErr
	}
	// Removed whatever happened; waited for, so a check leaves nothing behind.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	if err := r.Down(dctx, ref); err != nil {
		r.progress(ctx).Printf("the check's namespace %s could not be removed: %v (af reap or kubectl delete namespace %s removes it; it expires in an hour)", t.ns, err, t.ns)
	} else {
		c.Removed = true
	}
	c.Hardening, c.Cluster = r.hardenReports(ctx, t, c.Cluster)
	seen := harden.Seen{Enforcer: enforcerOf(c.Cluster)}
	if len(c.Hardening) > 0 {
		seen.Hardened = true
		for _, h := range c.Hardening {
			seen.Hardened = seen.Hardened && h.Hardened()
			if h.Found.NodePortFirst > 0 {
				seen.NodePortFirst, seen.NodePortLast = h.Found.NodePortFirst, h.Found.NodePortLast
			}
			for _, b := range h.Bridges {
				if !slices.Contains(seen.Bridges, b) {
					seen.Bridges = append(seen.Bridges, b)
				}
			}
		}
	}
	if c.Probe != nil {
		c.Advice = harden.Advise(escapedRoutes(c.Probe), seen)
	}
	return c, nil
}

// escapedRoutes are the routes' targets that got out in the deciding round; when none did
// there and the verdict is not contained, those that got out in an earlier one. A contained
// verdict has none: a route out in an early round only was the window while the enforcer
// applied the namespace's policies, which af's gates close.
func escapedRoutes(res *gate.Result) []harden.Open {
	if res.Verdict == gate.Contained {
		return nil
	}
	var out []harden.Open
	add := func(a gate.Attempt) {
		o := harden.Open{Route: a.Route, Target: a.Target}
		if !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	for _, a := range res.Routes {
		if a.Outcome == gate.Escaped {
			add(a)
		}
	}
	if len(out) == 0 {
		for _, a := range res.Escaped {
			add(a)
		}
	}
	return out
}

// Facts' names.
const (
	FactKubernetes = "kubernetes"
	FactNodes      = "nodes"
	FactFamilies   = "pod address families"
	FactEnforcer   = "enforcer"
	FactIngress    = "ingress controller"
	FactEngine     = "engine image"
	FactHardening  = "node hardening"
)

// enforcerPods are the pod name prefixes of enforcers that run as pods, and which they are.
var enforcerPods = []struct {
	prefix string
	is     harden.Enforcer
}{
	{"kube-router", harden.KubeRouter}, {"calico-node", harden.Calico}, {"cilium", harden.Cilium},
	{"kindnet", harden.Kindnet}, {"kube-network-policies", harden.KubeNetworkPolicies},
}

// clusterFacts reads what af can of the cluster with af-ci's rights; what it may not read it
// says so.
func (r *Runtime) clusterFacts(ctx context.Context, t *target) []afruntime.Fact {
	var out []afruntime.Fact
	add := func(name, value, from string) {
		out = append(out, afruntime.Fact{Name: name, Value: value, From: from})
	}
	if v, err := t.c.cs.Discovery().ServerVersion(); err == nil {
		add(FactKubernetes, v.GitVersion, "the API server's /version")
	}
	nodes, err := t.c.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: listPage})
	switch {
	case err != nil:
		add(FactNodes, "not read", "listing nodes: "+apiReason(err))
	default:
		v4, v6 := 0, 0
		var names []string
		for _, n := range nodes.Items {
			names = append(names, n.Name)
			cidrs := n.Spec.PodCIDRs
			if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
				cidrs = []string{n.Spec.PodCIDR}
			}
			for _, c := range cidrs {
				if strings.Contains(c, ":") {
					v6++
				} else {
					v4++
				}
			}
		}
		add(FactNodes, fmt.Sprintf("%d (%s)", len(nodes.Items), strings.Join(names, ", ")), "the nodes")
		fam := "unknown (no node has a pod range)"
		switch {
		case v4 > 0 && v6 > 0:
			fam = "IPv4 and IPv6 (dual-stack)"
		case v6 > 0:
			fam = "IPv6"
		case v4 > 0:
			fam = "IPv4 (the probe tries the IPv6 link-local segment all the same: a pod may have IPv6 without an IPv6 range)"
		}
		add(FactFamilies, fam, "the nodes' spec.podCIDRs")
	}
	pods, err := t.c.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{Limit: listPage})
	switch {
	case err != nil:
		add(FactEnforcer, "not read", "listing kube-system's pods: "+apiReason(err))
	default:
		found := map[harden.Enforcer][]string{}
		for _, p := range pods.Items {
			for _, e := range enforcerPods {
				if strings.HasPrefix(p.Name, e.prefix) {
					found[e.is] = append(found[e.is], p.Name)
				}
			}
		}
		if len(found) == 0 {
			add(FactEnforcer, "unknown", "no enforcer af knows runs as a pod in kube-system (it may run on the nodes: deploy/harden reads it there)")
		}
		for _, e := range enforcerPods {
			if ps := found[e.is]; len(ps) > 0 {
				add(FactEnforcer, string(e.is), fmt.Sprintf("kube-system's pods (%s)", strings.Join(ps, ", ")))
			}
		}
	}
	switch ctl, err := r.ingressControllerFor(ctx, t); {
	case err != nil:
		add(FactIngress, "not found", err.Error())
	case ctl == nil:
		add(FactIngress, "none found", "no IngressClass names a controller af knows; set AF_INGRESS_CONTROLLER for preview URLs")
	default:
		var ls []string
		for k, v := range ctl.Labels {
			ls = append(ls, k+"="+v)
		}
		slices.Sort(ls)
		add(FactIngress, ctl.Namespace+"/"+strings.Join(ls, ","), "AF_INGRESS_CONTROLLER or the IngressClasses")
	}
	add(FactEngine, r.opts.EngineImage, "the probe and the sidecar run it: a verdict means the cluster pulled it")
	return out
}

// ingressControllerFor is the controller af up of a manifest with a domain would let in.
func (r *Runtime) ingressControllerFor(ctx context.Context, t *target) (*IngressController, error) {
	m := *t.m
	m.Runtime.Domain = "preview.invalid"
	return r.ingressController(ctx, &target{id: t.id, ns: t.ns, m: &m, c: t.c})
}

// apiReason is an API error's reason, short.
func apiReason(err error) string {
	if apierrors.IsForbidden(err) {
		return "forbidden to this identity"
	}
	return err.Error()
}

// enforcerOf is the enforcer the facts name: deploy/harden's reading first (its reports add
// theirs first), then kube-system's pods.
func enforcerOf(facts []afruntime.Fact) harden.Enforcer {
	for _, f := range facts {
		if f.Name == FactEnforcer && f.Value != "unknown" && f.Value != "not read" {
			return harden.Enforcer(f.Value)
		}
	}
	return harden.Unknown
}

// hardenReports reads deploy/harden's reports, one ConfigMap per node in its namespace, and
// puts the enforcer they read first among the facts.
func (r *Runtime) hardenReports(ctx context.Context, t *target, facts []afruntime.Fact) ([]harden.Report, []afruntime.Fact) {
	cms, err := t.c.cs.CoreV1().ConfigMaps(harden.Namespace).List(ctx, metav1.ListOptions{LabelSelector: harden.ReportLabel + "=" + harden.ReportLabelValue})
	if err != nil {
		v := "not read"
		if apierrors.IsNotFound(err) {
			v = "not installed"
		}
		return nil, append(facts, afruntime.Fact{Name: FactHardening, Value: v, From: "deploy/harden's reports in namespace " + harden.Namespace + ": " + apiReason(err)})
	}
	var reps []harden.Report
	for _, cm := range cms.Items {
		var rep harden.Report
		if err := json.Unmarshal([]byte(cm.Data[harden.ReportKey]), &rep); err == nil {
			reps = append(reps, rep)
		}
	}
	sort.Slice(reps, func(i, j int) bool { return reps[i].Node < reps[j].Node })
	if len(reps) == 0 {
		return nil, append(facts, afruntime.Fact{Name: FactHardening, Value: "not installed", From: "no report of deploy/harden in namespace " + harden.Namespace})
	}
	var parts []string
	var enf harden.Enforcer
	for _, rep := range reps {
		state := "hardened"
		switch {
		case rep.Uninstalled:
			state = "rules removed (uninstall)"
		case !rep.Hardened():
			state = "a rule failed"
		}
		var chains []string
		for _, s := range rep.Rules {
			chains = append(chains, s.Tool+"/"+s.Chain+" "+s.State)
		}
		if len(chains) == 0 {
			chains = append(chains, "no rule")
		}
		parts = append(parts, fmt.Sprintf("%s: %s (%s; %s, %s ago)", rep.Node, state, strings.Join(chains, ", "), rep.Found.Enforcer, time.Since(rep.At).Round(time.Second)))
		if rep.Found.Enforcer != harden.Unknown {
			enf = rep.Found.Enforcer
		}
	}
	facts = append(facts, afruntime.Fact{Name: FactHardening, Value: strings.Join(parts, "; "), From: "deploy/harden's reports in namespace " + harden.Namespace})
	if enf != harden.Unknown {
		// The nodes' own rules say more than kube-system's pods: this reading replaces an
		// unknown one, and goes first.
		kept := []afruntime.Fact{{Name: FactEnforcer, Value: string(enf), From: "deploy/harden's reading of the nodes' packet filter"}}
		for _, f := range facts {
			if f.Name != FactEnforcer || (f.Value != "unknown" && f.Value != "not read") {
				kept = append(kept, f)
			}
		}
		facts = kept
	}
	return reps, facts
}
