package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
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
