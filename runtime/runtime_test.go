package runtime

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestProgressPerCall: concurrent calls each report where their own context says, and a call
// with none reports to the fallback.
func TestProgressPerCall(t *testing.T) {
	var mu sync.Mutex
	lines := map[string][]string{}
	to := func(env string) Progress {
		return func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			lines[env] = append(lines[env], fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	for i := range 8 {
		env := fmt.Sprintf("env-%d", i)
		ctx := WithProgress(context.Background(), to(env))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				ProgressFrom(ctx, to("fallback")).Printf("%s line %d", env, j)
			}
		}()
	}
	wg.Wait()
	ProgressFrom(context.Background(), to("fallback")).Printf("no context progress")
	for i := range 8 {
		env := fmt.Sprintf("env-%d", i)
		if len(lines[env]) != 50 || lines[env][49] != env+" line 49" {
			t.Errorf("%s got %d lines", env, len(lines[env]))
		}
	}
	if len(lines["fallback"]) != 1 {
		t.Errorf("fallback got %v", lines["fallback"])
	}
	var none Progress
	none.Printf("a nil Progress says nothing")
}
