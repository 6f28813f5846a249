package gate

import (
	"os"
	"testing"

	"github.com/antifailure/af/internal/afbuild"
)

// TestMain: the harness's tests share one build of af.
func TestMain(m *testing.M) { os.Exit(afbuild.Main(m)) }
