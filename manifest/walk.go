package manifest

// The strict walk: every key of the YAML checked against the manifest's types (unknown keys,
// wrong kinds, bounds), each problem with its path, before anything decodes it.

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/antifailure/af/failure"
)

// walker checks the document's shape against the Go types: unknown fields, wrong types,
// missing required fields, enums and integer bounds. It returns the document with every faulty
// value removed, so decoding what is left cannot fail and later checks see only sound values.
type walker struct {
	lines    map[string]int
	problems []Problem
	// bad holds the paths that had a problem; checks on anything below them are not repeated.
	bad map[string]bool
}

func (w *walker) fail(path, msg string) {
	w.bad[path] = true
	w.problems = append(w.problems, Problem{Path: path, Line: lineFor(w.lines, path), Message: msg, Code: failure.ManifestInvalid.Code})
}

var commandType = reflect.TypeFor[Command]()

func (w *walker) walk(path string, v any, t reflect.Type, depth int) any {
	if depth > maxDepth {
		w.fail(path, "nested too deeply")
		return nil
	}
	if t == commandType {
		switch c := v.(type) {
		case string:
			return c
		case []any:
			out := make([]any, 0, len(c))
			for i, e := range c {
				s, ok := e.(string)
				if !ok {
					w.fail(fmt.Sprintf("%s[%d]", path, i), fmt.Sprintf("is %s; every element of a command is a string (quote it)", describe(e)))
					return nil
				}
				out = append(out, s)
			}
			return out
		default:
			w.fail(path, fmt.Sprintf("is %s; a command is a string (run by /bin/sh -c) or a list of strings", describe(v)))
			return nil
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return w.walk(path, v, t.Elem(), depth)
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected a mapping of fields", describe(v)))
			return nil
		}
		return w.object(path, obj, t, depth)
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected a mapping of names to values", describe(v)))
			return nil
		}
		out := make(map[string]any, len(obj))
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			p := joinKey(path, k)
			if obj[k] == nil && t.Elem().Kind() != reflect.Pointer {
				w.fail(p, "has no value; write \"\" for an empty string")
				continue
			}
			if obj[k] == nil {
				w.fail(p, "has no value")
				continue
			}
			if cv := w.walk(p, obj[k], t.Elem(), depth+1); cv != nil {
				out[k] = cv
			}
		}
		return out
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected a list", describe(v)))
			return nil
		}
		out := make([]any, 0, len(arr))
		for i, e := range arr {
			p := fmt.Sprintf("%s[%d]", path, i)
			cv := w.walk(p, e, t.Elem(), depth+1)
			if cv == nil {
				// Keep positions stable so later checks name the right index.
				cv = reflect.Zero(t.Elem()).Interface()
			}
			out = append(out, cv)
		}
		return out
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected a string%s", describe(v), quoteHint(v)))
			return nil
		}
		return s
	case reflect.Int:
		n, ok := v.(json.Number)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected a whole number", describe(v)))
			return nil
		}
		i, err := strconv.ParseInt(string(n), 10, 32)
		if err != nil {
			w.fail(path, fmt.Sprintf("%s is not a whole number in range", n))
			return nil
		}
		return i
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			w.fail(path, fmt.Sprintf("is %s; expected true or false", describe(v)))
			return nil
		}
		return b
	}
	w.fail(path, "internal: unsupported type "+t.String())
	return nil
}

func (w *walker) object(path string, obj map[string]any, t reflect.Type, depth int) map[string]any {
	out := map[string]any{}
	known := map[string]reflect.StructField{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		known[name] = f
		names = append(names, name)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		p := joinKey(path, k)
		f, ok := known[k]
		if !ok {
			msg := fmt.Sprintf("unknown field %q", k)
			if s := suggest(k, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			} else {
				msg += "; known fields here: " + strings.Join(names, ", ")
			}
			w.fail(p, msg)
			continue
		}
		val := obj[k]
		if val == nil {
			// "field:" with nothing after it: treated as absent, so required fields say so below.
			continue
		}
		cv := w.walk(p, val, f.Type, depth+1)
		if cv == nil {
			continue
		}
		if !w.bounds(p, f, cv) {
			continue
		}
		out[k] = cv
	}
	for _, name := range names {
		f := known[name]
		if f.Tag.Get("required") == "true" && obj[name] == nil && !w.bad[joinKey(path, name)] {
			w.fail(joinKey(path, name), "is required")
		}
	}
	return out
}

// bounds applies the enum, min and max tags.
func (w *walker) bounds(path string, f reflect.StructField, v any) bool {
	if enum := f.Tag.Get("enum"); enum != "" {
		s, _ := v.(string)
		allowed := strings.Split(enum, "|")
		found := false
		for _, a := range allowed {
			found = found || a == s
		}
		if !found {
			msg := fmt.Sprintf("%q is not one of %s", s, strings.Join(allowed, ", "))
			if sg := suggest(s, allowed); sg != "" {
				msg += fmt.Sprintf("; did you mean %q?", sg)
			}
			w.fail(path, msg)
			return false
		}
	}
	if n, ok := v.(int64); ok {
		if lo := f.Tag.Get("min"); lo != "" {
			if m, _ := strconv.ParseInt(lo, 10, 64); n < m {
				w.fail(path, boundMessage(f, n))
				return false
			}
		}
		if hi := f.Tag.Get("max"); hi != "" {
			if m, _ := strconv.ParseInt(hi, 10, 64); n > m {
				w.fail(path, boundMessage(f, n))
				return false
			}
		}
	}
	return true
}

func boundMessage(f reflect.StructField, n int64) string {
	lo, hi := f.Tag.Get("min"), f.Tag.Get("max")
	if jsonName(f) == "port" {
		return fmt.Sprintf("%d is not a port (%s-%s)", n, lo, hi)
	}
	return fmt.Sprintf("%d is out of range (%s to %s)", n, lo, hi)
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func joinKey(path, key string) string {
	simple := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			simple = false
			break
		}
	}
	if !simple {
		key = strconv.Quote(key)
		return path + "[" + key + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
