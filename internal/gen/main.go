// Command gen writes the files af generates from its Go sources: the manifest's JSON Schema
// the error catalogue's and the settings' documentation, and the engine digest. `make generate` runs it; tests fail when the
// committed files differ from what it would write.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/internal/sourcedigest"
	"github.com/antifailure/af/manifest"
	"github.com/antifailure/af/settings"
)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	digest, err := sourcedigest.Compute(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	files := map[string][]byte{
		"manifest/af.schema.json": manifest.Schema(),
		"docs/errors.md":          failure.Markdown(),
		"docs/settings.md":        settings.Markdown(),
		"version/engine_gen.go":   sourcedigest.GoFile(digest),
	}
	for name, data := range files {
		path := filepath.Join(root, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
