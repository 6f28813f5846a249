// Package trust decides what of a pull request's af.yaml af takes. A pull request is untrusted
// input: it may change its services (images, builds, commands, env, dependencies), but where
// and how environments run, what they report, which database and secrets they get and the
// ceilings of their size are the operator's, read from the default branch's af.yaml only. Egress
// is the default branch's too unless a maintainer approves the widening (Widening lists it; the
// action reads the approval). Effective makes the manifest a run works under from those inputs,
// and nothing else does: Apply is the one place the base-only rules are enforced;
// docs/github.md has the table.
package trust

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/antifailure/af/manifest"
)

// Ignored is a value of the pull request's af.yaml that af did not take.
type Ignored struct {
	// Path is the field, as the manifest names it (runtime.domain, services.web.replicas).
	Path string
	// Why says what af took instead.
	Why string
}

func (i Ignored) String() string { return i.Path + ": " + i.Why }

// Apply returns the manifest a pull request's environment runs: pr's services within base's
// ceilings, and every base-only field (name, runtime, database, github, limits) base's, and
// what of pr it did not take, sorted by path. base nil (the default branch has no af.yaml, or it
// could not be read) means the defaults, with the kubernetes runtime and pr's name. Egress is
// left as pr has it: the approval decides it. Neither argument is changed.
func Apply(base, pr *manifest.Manifest) (*manifest.Manifest, []Ignored) {
	if base == nil {
		base = Defaults(pr.Name)
	}
	out := *pr
	var ignored []Ignored
	for _, f := range baseOnly {
		bv, pv := f.get(base), f.get(pr)
		if !reflect.DeepEqual(bv.Interface(), pv.Interface()) {
			ignored = append(ignored, differs(f.path, bv, pv)...)
		}
		f.get(&out).Set(bv)
	}
	out.Services = make(map[string]*manifest.Service, len(pr.Services))
	for name, s := range pr.Services {
		c := *s
		out.Services[name] = &c
		p := "services." + name
		if c.Replicas > base.Limits.Replicas {
			ignored = append(ignored, Ignored{p + ".replicas", fmt.Sprintf("%d asked; %d run, the default branch's limits.replicas", c.Replicas, base.Limits.Replicas)})
			c.Replicas = base.Limits.Replicas
		}
		if c.Resources != nil {
			r := *c.Resources
			c.Resources = &r
			if cut(&r.CPU, base.Limits.CPU) {
				ignored = append(ignored, Ignored{p + ".resources.cpu", fmt.Sprintf("%s asked; %s given, the default branch's limits.cpu", s.Resources.CPU, r.CPU)})
			}
			if cut(&r.Memory, base.Limits.Memory) {
				ignored = append(ignored, Ignored{p + ".resources.memory", fmt.Sprintf("%s asked; %s given, the default branch's limits.memory", s.Resources.Memory, r.Memory)})
			}
		}
	}
	slices.SortFunc(ignored, func(a, b Ignored) int { return strings.Compare(a.Path, b.Path) })
	return &out, ignored
}

// Defaults is what a default branch without af.yaml sets: every base-only field's default, the
// kubernetes runtime, no domain (so no preview URLs), no database, and name.
func Defaults(name string) *manifest.Manifest {
	m := &manifest.Manifest{Name: name, Runtime: manifest.Defaulted[manifest.Runtime](), GitHub: manifest.Defaulted[manifest.GitHub](),
		Limits: manifest.Defaulted[manifest.Limits]()}
	m.Runtime.Provider = "kubernetes"
	return m
}

// cut lowers q to ceiling when it asks for more, and says whether it did.
func cut(q *manifest.Quantity, ceiling manifest.Quantity) bool {
	if *q == "" || ceiling == "" {
		return false
	}
	v, err1 := q.Value()
	c, err2 := ceiling.Value()
	if err1 != nil || err2 != nil || v.Cmp(c) <= 0 {
		return false
	}
	*q = ceiling
	return true
}

// field is one base-only field of the manifest.
type field struct {
	path string
	get  func(m *manifest.Manifest) reflect.Value
}

// baseOnly lists the fields a pull request never sets. A test keeps it complete: every field of
// the manifest is here or in fromPullRequest.
var baseOnly = []field{
	{"name", func(m *manifest.Manifest) reflect.Value { return reflect.ValueOf(&m.Name).Elem() }},
	{"runtime", func(m *manifest.Manifest) reflect.Value { return reflect.ValueOf(&m.Runtime).Elem() }},
	{"database", func(m *manifest.Manifest) reflect.Value { return reflect.ValueOf(&m.Database).Elem() }},
	{"github", func(m *manifest.Manifest) reflect.Value { return reflect.ValueOf(&m.GitHub).Elem() }},
	{"limits", func(m *manifest.Manifest) reflect.Value { return reflect.ValueOf(&m.Limits).Elem() }},
}

// fromPullRequest are the top-level fields taken from the pull request: its services (held to
// the limits) and its egress (held to the default branch's unless approved, by package action).
var fromPullRequest = []string{"services", "egress"}

// differs lists the paths below p at which the pull request's value pv differs from the base
// branch's bv, one entry a leaf field (a whole value where it is a pointer, map or slice).
func differs(p string, bv, pv reflect.Value) []Ignored {
	if bv.Kind() == reflect.Struct {
		var out []Ignored
		t := bv.Type()
		for i := range t.NumField() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !reflect.DeepEqual(bv.Field(i).Interface(), pv.Field(i).Interface()) {
				out = append(out, differs(p+"."+name, bv.Field(i), pv.Field(i))...)
			}
		}
		return out
	}
	return []Ignored{{p, "taken from the default branch only (" + show(bv) + "); the pull request's " + show(pv) + " is ignored"}}
}

// show writes a field's value briefly, never a pointer's address.
func show(v reflect.Value) string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "unset"
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String:
		if v.String() == "" {
			return "unset"
		}
		return fmt.Sprintf("%q", v.String())
	case reflect.Struct:
		return "its own block"
	}
	if v.IsZero() {
		return "unset"
	}
	return fmt.Sprint(v.Interface())
}
