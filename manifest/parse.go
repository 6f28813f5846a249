package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/antifailure/af/failure"
)

// MaxSize is the largest manifest af reads.
const MaxSize = 1 << 20

// maxDepth bounds nesting; af.yaml is never deeper than a handful of levels.
const maxDepth = 32

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Path names the field at fault: services.web.port, egress.rules[2].host. Empty for the
	// document as a whole.
	Path string `json:"path"`
	// Line is the 1-based line of the field in the file, when known.
	Line    int          `json:"line,omitempty"`
	Message string       `json:"message"`
	Code    failure.Code `json:"code"`
}

func (p Problem) String() string {
	path := p.Path
	if path == "" {
		path = "(document)"
	}
	if p.Line > 0 {
		return fmt.Sprintf("%s (line %d): %s", path, p.Line, p.Message)
	}
	return path + ": " + p.Message
}

// Result is what Parse found: the manifest with defaults applied (nil when the document could
// not be read at all), every problem, and warnings that do not stop af.
type Result struct {
	Manifest *Manifest
	Problems []Problem
	Warnings []Problem
}

// Valid reports whether the manifest has no problems.
func (r *Result) Valid() bool { return len(r.Problems) == 0 }

// Err returns nil when the manifest is valid, else one catalogued failure listing every
// problem. Its code is the problems' code when they all share one (a dependency cycle alone is
// AF-RUN-041), else AF-RUN-011. source names the file for the message.
func (r *Result) Err(source string) error {
	if r.Valid() {
		return nil
	}
	entry := failure.ManifestInvalid
	first := r.Problems[0].Code
	same := true
	for _, p := range r.Problems {
		same = same && p.Code == first
	}
	if same {
		if e, ok := failure.Lookup(first); ok {
			entry = e
		}
	}
	var b strings.Builder
	if len(r.Problems) == 1 {
		fmt.Fprintf(&b, "%s has 1 problem:", source)
	} else {
		fmt.Fprintf(&b, "%s has %d problems:", source, len(r.Problems))
	}
	for _, p := range r.Problems {
		b.WriteString("\n    ")
		b.WriteString(p.String())
		if p.Code != entry.Code {
			fmt.Fprintf(&b, " [%s]", p.Code)
		}
	}
	return &failure.Error{Entry: entry, Detail: b.String(), Cause: &Invalid{Problems: r.Problems, text: b.String()}}
}

// Invalid is the cause carried by Result.Err: the problems, for errors.As.
type Invalid struct {
	Problems []Problem
	text     string
}

func (e *Invalid) Error() string { return e.text }

// Load reads and parses the manifest at path; "-" reads stdin from in. An unreadable file is
// an AF-RUN-010 failure; a readable one yields a Result whatever its problems.
func Load(path string, in io.Reader) (*Result, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(in, MaxSize+1))
	} else {
		var f *os.File
		f, err = os.Open(path)
		if err == nil {
			defer f.Close()
			var st os.FileInfo
			if st, err = f.Stat(); err == nil && st.IsDir() {
				err = fmt.Errorf("%s is a directory", path)
			}
			if err == nil {
				data, err = io.ReadAll(io.LimitReader(f, MaxSize+1))
			}
		}
	}
	if err != nil {
		return nil, failure.New(failure.ManifestUnreadable, "cannot read "+path, err)
	}
	return Parse(data), nil
}

// Parse reads a manifest from YAML (or JSON) and validates it. It never panics on input and
// reports every problem it finds.
func Parse(data []byte) *Result {
	r := &Result{}
	if len(data) > MaxSize {
		r.Problems = append(r.Problems, Problem{Message: fmt.Sprintf("the manifest is %d bytes; af reads at most %d", len(data), MaxSize), Code: failure.ManifestInvalid.Code})
		return r
	}
	if len(bytes.TrimSpace(data)) == 0 {
		r.Problems = append(r.Problems, Problem{Message: "the manifest is empty", Code: failure.ManifestInvalid.Code})
		return r
	}
	jsonDoc, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		r.Problems = append(r.Problems, Problem{Message: "not valid YAML: " + cleanYAMLError(err), Line: yamlErrorLine(err), Code: failure.ManifestInvalid.Code})
		return r
	}
	dec := json.NewDecoder(bytes.NewReader(jsonDoc))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		r.Problems = append(r.Problems, Problem{Message: "not valid YAML: " + err.Error(), Code: failure.ManifestInvalid.Code})
		return r
	}
	if _, ok := tree.(map[string]any); !ok {
		r.Problems = append(r.Problems, Problem{Message: "the manifest must be a mapping of fields (name, runtime, services, ...), not " + describe(tree), Code: failure.ManifestInvalid.Code})
		return r
	}

	lines := lineIndex(data)
	w := &walker{lines: lines, bad: map[string]bool{}}
	clean := w.walk("", tree, reflect.TypeFor[Manifest](), 0)
	r.Problems = append(r.Problems, w.problems...)

	cleanJSON, err := json.Marshal(clean)
	if err != nil {
		r.Problems = append(r.Problems, Problem{Message: "internal: " + err.Error(), Code: failure.Internal.Code})
		return r
	}
	m := &Manifest{}
	strict := json.NewDecoder(bytes.NewReader(cleanJSON))
	strict.DisallowUnknownFields()
	if err := strict.Decode(m); err != nil {
		r.Problems = append(r.Problems, Problem{Message: "internal: " + err.Error(), Code: failure.Internal.Code})
		return r
	}

	v := &validator{lines: lines, bad: w.bad}
	v.manifest(m)
	r.Problems = append(r.Problems, v.problems...)
	r.Warnings = v.warnings
	sortProblems(r.Problems)
	sortProblems(r.Warnings)
	applyDefaults(m)
	r.Manifest = m
	return r
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Line != ps[j].Line && ps[i].Line > 0 && ps[j].Line > 0 {
			return ps[i].Line < ps[j].Line
		}
		return ps[i].Path < ps[j].Path
	})
}

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

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "empty"
	case string:
		return fmt.Sprintf("the string %q", truncate(x, 40))
	case json.Number:
		return "the number " + string(x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

func quoteHint(v any) string {
	switch v.(type) {
	case bool:
		return " (YAML reads yes, no, on, off, true and false as booleans: quote the value)"
	case json.Number:
		return " (quote the value)"
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// suggest returns the candidate closest to s when it is close enough to be a likely typo.
func suggest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	if len(s) <= 2 && bestD > 0 {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func cleanYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	s = strings.TrimPrefix(s, "yaml: ")
	return s
}

func yamlErrorLine(err error) int {
	s := err.Error()
	i := strings.Index(s, "line ")
	if i < 0 {
		return 0
	}
	j := i + len("line ")
	k := j
	for k < len(s) && s[k] >= '0' && s[k] <= '9' {
		k++
	}
	n, convErr := strconv.Atoi(s[j:k])
	if convErr != nil {
		return 0
	}
	return n
}
