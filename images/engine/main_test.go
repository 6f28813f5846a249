package engine

import (
	"os"
	"testing"

	"github.com/antifailure/af/internal/afbuild"
)

// TestMain: the package's tests share one build of af.
func TestMain(m *testing.M) { os.Exit(afbuild.Main(m)) }
