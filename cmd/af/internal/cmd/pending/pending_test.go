package pending

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/antifailure/af/cmd/af/internal/cmdtest"
	"github.com/antifailure/af/cmd/af/internal/factory"
	"github.com/antifailure/af/failure"
)

// TestPendingSayWhatIsMissing: each pending command refuses with the catalogue's code and
// does nothing else.
func TestPendingSayWhatIsMissing(t *testing.T) {
	for _, c := range []struct {
		args []string
		want *failure.Entry
	}{
		{[]string{"webhook", "trigger"}, failure.RuntimeCannot},
	} {
		root := func(f *factory.Factory) *cobra.Command {
			r := &cobra.Command{Use: "af", SilenceErrors: true, SilenceUsage: true}
			r.AddCommand(Commands(f)...)
			return r
		}
		r := cmdtest.Exec(t, cmdtest.Env{}, root, c.args...)
		if e := failure.As(r.Err); e == nil || e.Entry != c.want {
			t.Errorf("%v: want %s, got %v", c.args, c.want.Code, r.Err)
		}
	}
}
