package testreq

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestModes runs a child test under each mode and reads how it ended.
func TestModes(t *testing.T) {
	if os.Getenv("TESTREQ_CHILD") != "" {
		return
	}
	for _, c := range []struct {
		fn, strict, cluster, want string
	}{
		{"missing", "", "", "SKIP"},
		{"missing", "1", "", "FAIL"},
		{"elsewhere", "1", "", "SKIP"},
		{"elsewhere", "1", "1", "FAIL"},
		{"elsewhere", "", "1", "SKIP"},
		{"tools", "1", "", "FAIL"},
		{"tools", "", "", "SKIP"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTREQ_CHILD="+c.fn, "AF_TEST_STRICT="+c.strict, "AF_TESTCLUSTER="+c.cluster)
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "--- "+c.want+": TestChild") {
			t.Errorf("%s strict=%q cluster=%q: want %s, got:\n%s", c.fn, c.strict, c.cluster, c.want, out)
		}
	}
}

func TestChild(t *testing.T) {
	switch os.Getenv("TESTREQ_CHILD") {
	case "missing":
		Missing(t, "a thing")
	case "elsewhere":
		Elsewhere(t, "the cluster")
	case "tools":
		Tools(t, "no-such-tool-af-testreq")
	default:
		return
	}
	t.Error("went on past a missing requirement")
}
