package manifest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// SchemaID is the $id of the generated schema.
const SchemaID = "https://github.com/antifailure/af/manifest/af.schema.json"

// Schema returns the JSON Schema (draft 2020-12) of af.yaml, generated from the Go types and
// their tags. manifest/af.schema.json is this output; a test keeps it current.
func Schema() []byte {
	root := typeSchema(reflect.TypeFor[Manifest]())
	root["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	root["$id"] = SchemaID
	root["title"] = "af.yaml"
	root["description"] = "The af manifest: services, runtime, egress rules and GitHub settings of a preview environment."
	// Service names are DNS labels and must not use af's reserved prefix.
	services := root["properties"].(map[string]any)["services"].(map[string]any)
	services["propertyNames"] = map[string]any{
		"pattern":   "^[a-z]([-a-z0-9]*[a-z0-9])?$",
		"maxLength": MaxNameLength,
		"not":       map[string]any{"pattern": "^" + ReservedServicePrefix},
	}
	services["minProperties"] = 1
	// An egress rule names a host or an address range, not both.
	rule := root["properties"].(map[string]any)["egress"].(map[string]any)["properties"].(map[string]any)["rules"].(map[string]any)["items"].(map[string]any)
	rule["oneOf"] = []any{
		map[string]any{"required": []string{"host"}},
		map[string]any{"required": []string{"cidr"}},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(root)
	return buf.Bytes()
}

func typeSchema(t reflect.Type) map[string]any {
	if t == commandType {
		return map[string]any{
			"oneOf": []any{
				map[string]any{"type": "string", "minLength": 1, "description": "Shell form, run by /bin/sh -c."},
				map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1, "description": "Exec form, run as it is."},
			},
		}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Int:
		return map[string]any{"type": "integer"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": typeSchema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			name := jsonName(f)
			s := typeSchema(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				s["description"] = d
			}
			if e := f.Tag.Get("enum"); e != "" {
				var vals []any
				for _, v := range strings.Split(e, "|") {
					vals = append(vals, v)
				}
				s["enum"] = vals
			}
			if d, ok := f.Tag.Lookup("default"); ok {
				s["default"] = typedDefault(f.Type, d)
			}
			if v := f.Tag.Get("min"); v != "" {
				n, _ := strconv.Atoi(v)
				s["minimum"] = n
			}
			if v := f.Tag.Get("max"); v != "" {
				n, _ := strconv.Atoi(v)
				s["maximum"] = n
			}
			if f.Tag.Get("required") == "true" {
				required = append(required, name)
			}
			props[name] = s
		}
		out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			sort.Strings(required)
			out["required"] = required
		}
		return out
	}
	return map[string]any{}
}

func typedDefault(t reflect.Type, d string) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int:
		n, _ := strconv.Atoi(d)
		return n
	case reflect.Bool:
		b, _ := strconv.ParseBool(d)
		return b
	}
	return d
}
