package manifest

import (
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
)

// Service kinds.
const (
	KindWeb    = "web"
	KindWorker = "worker"
	KindCron   = "cron"
)

// KindOf returns the service's kind, inferring it when the manifest does not say: web when a
// port is set, else worker.
func KindOf(s *Service) string {
	switch {
	case s.Kind != "":
		return s.Kind
	case s.Port != 0:
		return KindWeb
	default:
		return KindWorker
	}
}

// applyDefaults fills every absent field that has a default tag, and the inferred kind.
func applyDefaults(m *Manifest) {
	fill(reflect.ValueOf(m).Elem())
	for _, s := range m.Services {
		if s != nil && s.Kind == "" {
			s.Kind = KindOf(s)
		}
	}
	if m.Database != nil && m.Database.Provider == "container" && m.Database.Engine == "" {
		m.Database.Engine = "postgres"
	}
}

func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fill(v.Elem())
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			fill(v.MapIndex(k))
		}
	case reflect.Slice:
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Struct:
		t := v.Type()
		if t == commandType {
			return
		}
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if def, ok := f.Tag.Lookup("default"); ok && fv.IsZero() {
				setDefault(fv, def)
			}
			fill(fv)
		}
	}
}

func setDefault(fv reflect.Value, def string) {
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(def)
	case reflect.Int:
		n, _ := strconv.Atoi(def)
		fv.SetInt(int64(n))
	case reflect.Pointer:
		if fv.Type().Elem().Kind() == reflect.Bool {
			b, _ := strconv.ParseBool(def)
			fv.Set(reflect.ValueOf(&b))
		}
	}
}

// StartOrder returns the service names in an order where every service comes after the
// services it depends on; services with no order between them are sorted by name. It assumes
// a valid manifest (no cycles); services caught in a cycle are appended at the end.
func StartOrder(services map[string]*Service) []string {
	indegree := map[string]int{}
	dependents := map[string][]string{}
	for n := range services {
		indegree[n] += 0
		for _, d := range deps(services, n) {
			indegree[n]++
			dependents[d] = append(dependents[d], n)
		}
	}
	var ready, order []string
	for n, d := range indegree {
		if d == 0 {
			ready = append(ready, n)
		}
	}
	for len(ready) > 0 {
		sort.Strings(ready)
		n := ready[0]
		ready = ready[1:]
		order = append(order, n)
		for _, m := range dependents[n] {
			indegree[m]--
			if indegree[m] == 0 {
				ready = append(ready, m)
			}
		}
	}
	if len(order) < len(services) {
		placed := map[string]bool{}
		for _, n := range order {
			placed[n] = true
		}
		for _, n := range slices.Sorted(maps.Keys(services)) {
			if !placed[n] {
				order = append(order, n)
			}
		}
	}
	return order
}

// Defaulted returns a zero T with its declared defaults filled in (the default tags): what a
// block the manifest leaves out, or a manifest that is missing, means.
func Defaulted[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}
