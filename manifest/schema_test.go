package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

func TestSchemaIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("af.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, Schema()) {
		t.Fatal("manifest/af.schema.json is stale: run `make generate` and commit the result")
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

func yamlToInstance(t *testing.T, data []byte) any {
	t.Helper()
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSchemaAgreesWithParser checks the generated schema with a real JSON Schema validator: it
// accepts every valid example, and rejects the shape errors the parser rejects.
func TestSchemaAgreesWithParser(t *testing.T) {
	s := compileSchema(t)
	for _, f := range validFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(yamlToInstance(t, data)); err != nil {
			t.Errorf("%s: schema rejects a valid manifest: %v", f, err)
		}
	}
	for _, doc := range []string{
		base + "servises: {}\n",
		strings.Replace(base, "port: 8080", "port: 70000", 1),
		strings.Replace(base, "provider: kubernetes", "provider: kubernets", 1),
		strings.Replace(base, "  web:", "  af-web:", 1),
		withWeb("    replicas: 0\n"),
		withWeb("    command: []\n"),
		withWeb("    env:\n      DEBUG: true\n"),
		base + "egress:\n  rules:\n    - mode: allow\n",
		base + "github:\n  check: maybe\n",
	} {
		if Parse([]byte(doc)).Valid() {
			t.Fatalf("parser accepts %q", doc)
		}
		if err := s.Validate(yamlToInstance(t, []byte(doc))); err == nil {
			t.Errorf("schema accepts what the parser rejects:\n%s", doc)
		}
	}
}

// schemaPaths lists every property path of the schema: "services.*.build.args.*",
// "egress.rules[].host".
func schemaPaths(prefix string, s map[string]any, out *[]string) {
	if props, ok := s["properties"].(map[string]any); ok {
		for name, sub := range props {
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			*out = append(*out, p)
			schemaPaths(p, sub.(map[string]any), out)
		}
	}
	if add, ok := s["additionalProperties"].(map[string]any); ok {
		schemaPaths(prefix+".*", add, out)
	}
	if items, ok := s["items"].(map[string]any); ok && s["type"] == "array" {
		schemaPaths(prefix+"[]", items, out)
	}
}

// lookup returns every value at a schema path pattern in a generic JSON value, keyed by the
// concrete path.
func lookup(v any, pattern string) map[string]any {
	found := map[string]any{}
	var walk func(cur any, rest, concrete string)
	walk = func(cur any, rest, concrete string) {
		if rest == "" {
			found[concrete] = cur
			return
		}
		if strings.HasPrefix(rest, "[]") {
			arr, _ := cur.([]any)
			for i, e := range arr {
				walk(e, strings.TrimPrefix(strings.TrimPrefix(rest, "[]"), "."), fmt.Sprintf("%s[%d]", concrete, i))
			}
			return
		}
		key, tail, _ := strings.Cut(rest, ".")
		if i := strings.Index(key, "[]"); i >= 0 {
			key, tail = key[:i], rest[i:]
		}
		obj, _ := cur.(map[string]any)
		if key == "*" {
			for k, e := range obj {
				walk(e, tail, concrete+"."+k)
			}
			return
		}
		if e, ok := obj[key]; ok {
			walk(e, tail, concrete+"."+key)
		}
	}
	walk(v, pattern, "")
	return found
}

// TestEveryFieldIsRead checks that every property the schema names is set in a valid example
// and comes out of the parser with the value written: no field is accepted and then ignored.
func TestEveryFieldIsRead(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(Schema(), &schema); err != nil {
		t.Fatal(err)
	}
	var paths []string
	schemaPaths("", schema, &paths)
	sort.Strings(paths)

	type doc struct{ source, parsed any }
	var docs []doc
	for _, f := range validFiles(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var source any
		if err := yaml.Unmarshal(data, &source); err != nil {
			t.Fatal(err)
		}
		r := Parse(data)
		if !r.Valid() {
			t.Fatalf("%s: %v", f, r.Problems)
		}
		out, err := json.Marshal(r.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		var parsed any
		if err := json.Unmarshal(out, &parsed); err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc{source, parsed})
	}
	for _, p := range paths {
		seen := false
		for _, d := range docs {
			for concrete, want := range lookup(d.source, p) {
				seen = true
				got, ok := concreteLookup(d.parsed, concrete)
				if isContainer(want) && ok {
					continue // its fields are checked one by one
				}
				if !ok || !reflect.DeepEqual(normalize(got), normalize(want)) {
					t.Errorf("%s: written %v, parsed %v (present %t)", concrete, want, got, ok)
				}
			}
		}
		if !seen {
			t.Errorf("schema field %s is set by no valid example: add it to testdata/valid", p)
		}
	}
	t.Logf("%d schema fields, each set in an example and read back", len(paths))
}

func concreteLookup(v any, concrete string) (any, bool) {
	cur := v
	for _, part := range strings.Split(strings.TrimPrefix(concrete, "."), ".") {
		key := part
		var idx []int
		for {
			i := strings.LastIndex(key, "[")
			if i < 0 {
				break
			}
			var n int
			fmt.Sscanf(key[i:], "[%d]", &n)
			idx = append([]int{n}, idx...)
			key = key[:i]
		}
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[key]; !ok {
			return nil, false
		}
		for _, n := range idx {
			arr, ok := cur.([]any)
			if !ok || n >= len(arr) {
				return nil, false
			}
			cur = arr[n]
		}
	}
	return cur, true
}

// normalize makes numbers from YAML and JSON comparable.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// isContainer reports whether v is an object or a list of objects, whose fields are checked
// one by one.
func isContainer(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return true
	case []any:
		for _, e := range x {
			if _, ok := e.(map[string]any); ok {
				return true
			}
		}
	}
	return false
}
