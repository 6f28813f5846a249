package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the parser. It must never panic, must always say either
// valid (with a manifest) or invalid (with at least one problem naming a code), and a valid
// manifest must survive a round trip through its JSON form.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/valid/*")
	files = append(files, "../examples/shop/af.yaml")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(base))
	f.Add([]byte("name: &a [*a]"))
	f.Add([]byte("services: {web: {command: [1, {a: b}]}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := Parse(data)
		if r.Valid() {
			if r.Manifest == nil {
				t.Fatal("valid without a manifest")
			}
			out, err := json.Marshal(r.Manifest)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			again := Parse(out)
			if !again.Valid() {
				t.Fatalf("round trip of a valid manifest is invalid: %v\n%s", again.Problems, out)
			}
			return
		}
		for _, p := range r.Problems {
			if p.Code == "" || p.Message == "" {
				t.Fatalf("problem without code or message: %+v", p)
			}
		}
		if r.Err("af.yaml") == nil {
			t.Fatal("invalid but Err is nil")
		}
	})
}
