// Package render writes what af found out, for people at a terminal: the probe's verdict route
// by route, each service's state and size, the preview URLs, as `af up` and `af status` print
// them. What the pull request reads (the comment, the check run, the step summary) is
// github/report's markdown of the same facts.
package render

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/antifailure/af/gate"
	afruntime "github.com/antifailure/af/runtime"
)

// Table writes rows with every column as wide as its widest cell (the last column unpadded),
// each line after indent.
func Table(w io.Writer, indent string, rows [][]string) { table(w, indent, rows) }

// table writes rows with every column as wide as its widest cell (the last column unpadded).
func table(w io.Writer, indent string, rows [][]string) {
	width := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		b.WriteString(indent)
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", width[i], c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// Probe writes the probe's verdict and every route of the deciding round, then every route
// that got out in any round.
func Probe(w io.Writer, p *gate.Result) {
	if p == nil {
		return
	}
	fmt.Fprintf(w, "probe: %s (%d rounds, %.0f ms)\n", p.Verdict, p.Rounds, p.MS)
	if p.Reason != "" {
		fmt.Fprintf(w, "  why: %s\n", p.Reason)
	}
	rows := [][]string{{"ROUTE", "TARGET", "RESULT", "MS", "DETAIL"}}
	for _, a := range p.Routes {
		rows = append(rows, []string{a.Route, a.Target, string(a.Outcome), fmt.Sprintf("%.1f", a.MS), a.Detail})
	}
	table(w, "  ", rows)
	for _, a := range p.Escaped {
		fmt.Fprintf(w, "  ESCAPED: %s to %s (%s)\n", a.Route, a.Target, a.Detail)
	}
}

// Services writes one line per service: its state, ready/desired instances, the size read off
// its pods, and why it is not ready (or its last exit).
func Services(w io.Writer, ss []afruntime.ServiceStatus) {
	rows := [][]string{{"SERVICE", "STATE", "READY", "CPU", "MEMORY", "NOTE"}}
	for _, s := range ss {
		note := s.Reason
		if s.ExitCode != nil {
			note = strings.TrimSpace(fmt.Sprintf("exit %d %s", *s.ExitCode, s.Reason))
		}
		rows = append(rows, []string{s.Name, s.State, fmt.Sprintf("%d/%d", s.Ready, s.Desired), dash(s.CPU), dash(s.Memory), note})
	}
	table(w, "", rows)
}

// URLs writes each web service's preview URL, or says why there is none.
func URLs(w io.Writer, urls map[string]string) {
	if len(urls) == 0 {
		fmt.Fprintln(w, "no preview URL: the manifest sets no runtime.domain")
		return
	}
	names := make([]string, 0, len(urls))
	for svc := range urls {
		names = append(names, svc)
	}
	sort.Strings(names)
	for _, svc := range names {
		fmt.Fprintf(w, "preview URL of %s: %s\n", svc, urls[svc])
	}
}

// Result writes an af up result: the probe, the services, the URLs.
func Result(w io.Writer, res *afruntime.Result) {
	Probe(w, res.Probe)
	fmt.Fprintln(w)
	Services(w, res.Services)
	fmt.Fprintln(w)
	URLs(w, res.URLs)
}

// Status writes an af status answer.
func Status(w io.Writer, st *afruntime.Status) {
	if !st.Exists {
		fmt.Fprintf(w, "environment %s: not running (no namespace %s)\n", st.Environment, st.Namespace)
		return
	}
	fmt.Fprintf(w, "environment %s in namespace %s", st.Environment, st.Namespace)
	if st.ExpiresAt != nil {
		fmt.Fprintf(w, ", expires %s", st.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
	}
	fmt.Fprintln(w)
	Quota(w, st.Quota)
	Watch(w, st.Watch)
	urls := map[string]string{}
	for _, s := range st.Services {
		if s.URL != "" {
			urls[s.Name] = s.URL
		}
	}
	if st.Probe == nil {
		fmt.Fprintln(w, "probe: no verdict recorded")
		Services(w, st.Services)
		return
	}
	Result(w, &afruntime.Result{Probe: st.Probe, Services: st.Services, URLs: urls})
	for _, s := range st.Services {
		if s.State == afruntime.StateFailed {
			fmt.Fprintf(w, "%s failed: `af logs %s --previous` shows its last lines\n", s.Name, s.Name)
		}
	}
}

// Watch writes the environment's containment as its probe sees it now, on one line, above the
// verdict af up read (the probe's table). Nothing when the runtime reported none.
func Watch(w io.Writer, wa *afruntime.Watch) {
	if wa == nil {
		return
	}
	fmt.Fprintf(w, "watch: %s\n", wa.Detail)
}

// Quota writes the environment's quota on one line, used/hard: pods, then the pods' CPU and
// memory limits. Nothing when there is none.
func Quota(w io.Writer, q *afruntime.Quota) {
	if q == nil {
		return
	}
	fmt.Fprintf(w, "quota: pods %s/%s, cpu %s/%s, memory %s/%s\n",
		quantity(q.Pods.Used, plain), quantity(q.Pods.Hard, plain),
		quantity(q.CPU.Used, cores), quantity(q.CPU.Hard, cores),
		quantity(q.Memory.Used, binary), quantity(q.Memory.Hard, binary))
}

// quantity writes a Kubernetes quantity with how; as it is when it does not parse.
func quantity(s string, how func(resource.Quantity) string) string {
	if s == "" {
		return "-"
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return s
	}
	return how(q)
}

func plain(q resource.Quantity) string { return q.String() }

// cores writes CPU in cores: 1300m is 1.3, 14 is 14.
func cores(q resource.Quantity) string {
	return strconv.FormatFloat(float64(q.MilliValue())/1000, 'f', -1, 64)
}

// binary writes memory in the largest binary unit it is at least one of, to one decimal:
// 1600Mi is 1.6Gi, 15Gi is 15Gi.
func binary(q resource.Quantity) string {
	v := float64(q.Value())
	for _, u := range []struct {
		name string
		size float64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if v >= u.size {
			return strconv.FormatFloat(float64(int64(v/u.size*10+0.5))/10, 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatInt(q.Value(), 10)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
