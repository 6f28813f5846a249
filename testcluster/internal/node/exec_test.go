package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/antifailure/af/internal/testnet"
	"github.com/antifailure/af/internal/testreq"
)

// TestSaveRulesReadsThroughSetChurn: kube-router deletes rules that match ipsets and destroys
// their sets as namespaces go away, and an iptables-save at that moment fails with "Set with
// index N in kernel doesn't exist" (make test failed so once in CI, reading the cluster's state
// right after a phase that removed namespaces). In a network namespace of its own the test keeps
// 300 rules on 300 sets standing while a shell adds and removes others beside them, as the
// enforcer does, and reads the table both ways in turn: iptables-save alone must be seen to tear
// (or the test shows nothing), and every read through saveRules must succeed and hold the
// standing rules.
func TestSaveRulesReadsThroughSetChurn(t *testing.T) {
	testreq.Tools(t, "bash", "iptables", "iptables-save", "iptables-restore", "ipset")
	h := testnet.New(t).Host("ipset")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	standing := `for i in $(seq 1 300); do ipset create P$i hash:ip || exit 1; done
{ echo '*filter'; for i in $(seq 1 300); do echo "-A INPUT -m set --match-set P$i src -j ACCEPT"; done; echo COMMIT; } | iptables-restore --noflush`
	if out, err := h.Command(ctx, "bash", "-c", standing).CombinedOutput(); err != nil {
		t.Fatalf("the standing rules: %v: %s", err, out)
	}
	churnCtx, stopChurn := context.WithCancel(ctx)
	churn := h.Command(churnCtx, "bash", "-c", `i=0; while :; do i=$((i+1))
ipset create C$i hash:ip && iptables -A INPUT -m set --match-set C$i src -j ACCEPT &&
iptables -D INPUT -m set --match-set C$i src -j ACCEPT && ipset destroy C$i || exit 1; done`)
	var churnErr strings.Builder
	churn.Stderr = &churnErr
	if err := churn.Start(); err != nil {
		t.Fatal(err)
	}
	churned := make(chan struct{})
	go func() {
		_ = churn.Wait()
		close(churned)
	}()
	defer func() {
		stopChurn()
		<-churned
	}()

	const wantReads = 100
	torn, reads := 0, 0
	for i := 0; i < 5000 && (torn < 3 || reads < wantReads); i++ {
		select {
		case <-churned:
			t.Fatalf("the churning shell stopped: %s", churnErr.String())
		default:
		}
		err := h.Do(func() error {
			if _, err := run(ctx, "iptables-save", "-t", "filter"); err != nil {
				if !strings.Contains(err.Error(), tornRead) {
					return fmt.Errorf("iptables-save failed otherwise: %w", err)
				}
				torn++
			}
			if reads >= wantReads {
				return nil
			}
			out, err := saveRules(ctx, "iptables-save", "filter")
			if err != nil {
				return fmt.Errorf("saveRules, read %d: %w", reads+1, err)
			}
			reads++
			if !strings.Contains(out, "--match-set P1 src") || !strings.Contains(out, "--match-set P300 src") {
				t.Errorf("read %d lacks the standing rules:\n%.400s", reads, out)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if torn == 0 {
		t.Fatalf("iptables-save alone never tore in %d reads under the churn: this test shows nothing on this kernel", reads)
	}
	if reads < wantReads {
		t.Fatalf("only %d reads through saveRules", reads)
	}
	t.Logf("iptables-save alone tore %d times; %d reads through saveRules all whole", torn, reads)
}
