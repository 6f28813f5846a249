package gate

import (
	"testing"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/failure"
)

// TestGateRefusesBadFlags: targets and timings it cannot use are refused before anything is
// tried (the routes themselves are tested against the network-namespace harness in gate/).
func TestGateRefusesBadFlags(t *testing.T) {
	for name, args := range map[string][]string{
		"no API server":       {"--sidecar", "127.0.0.1:1"},
		"no sidecar":          {"--apiserver", "127.0.0.1:1"},
		"a bad node port":     {"--sidecar", "127.0.0.1:1", "--apiserver", "127.0.0.1:1", "--node", "127.0.0.1", "--node-ports", "99999"},
		"a bad ipv6 choice":   {"--sidecar", "127.0.0.1:1", "--apiserver", "127.0.0.1:1", "--ipv6", "maybe"},
		"a negative interval": {"--sidecar", "127.0.0.1:1", "--apiserver", "127.0.0.1:1", "--interval", "-1s"},
	} {
		r := cmdtest.Exec(t, cmdtest.Env{}, NewCmdGate, args...)
		if failure.CodeOf(r.Err) != failure.UsageInvalid.Code {
			t.Errorf("%s: want AF-RUN-003, got %v", name, r.Err)
		}
	}
}
