package kubernetes

// A service's logs through the API: every instance (or the migration's pod), each line
// prefixed with the pod that wrote it; the gate's own lines with LogOptions.Gate; the crashed
// container's with Previous.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/antifailure/af/failure"
	afruntime "github.com/antifailure/af/runtime"
)

// Logs writes the service's log lines to w as "POD | LINE".
func (r *Runtime) Logs(ctx context.Context, ref afruntime.Ref, o afruntime.LogOptions, w io.Writer) error {
	t, err := r.resolve(ctx, ref)
	if err != nil {
		return err
	}
	if _, ok := t.m.Services[o.Service]; !ok && len(t.m.Services) > 0 {
		return failure.Newf(failure.UsageInvalid, "the manifest has no service %q; it has %s", o.Service, joinSorted(slices.Sorted(maps.Keys(t.m.Services))))
	}
	if err := ownNamespace(ctx, t, ref); err != nil {
		return err
	}
	workload := WorkloadService
	if o.Migration {
		workload = WorkloadMigration
	}
	sel := labels.Set{LabelService: o.Service, LabelWorkload: workload}.String()
	pods, err := t.c.cs.CoreV1().Pods(t.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return apiError(t.c, "listing the pods of "+o.Service, err)
	}
	items := pods.Items
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	if len(items) == 0 {
		what := "instances"
		if o.Migration {
			what = "migration pod"
		}
		return failure.Newf(failure.NotPlaced, "service %s of %s has no %s in namespace %s", o.Service, ref.ID, what, t.ns).
			WithHint("`af status` says what the environment is doing.")
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(items))
	for i := range items {
		p := &items[i]
		container := GateContainer
		if !o.Gate && len(p.Spec.Containers) > 0 {
			container = p.Spec.Containers[0].Name
		}
		opts := &corev1.PodLogOptions{Container: container, Follow: o.Follow, Previous: o.Previous}
		if o.Since > 0 {
			s := int64(o.Since.Seconds())
			opts.SinceSeconds = &s
		}
		if o.Tail > 0 {
			opts.TailLines = &o.Tail
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := t.c.cs.CoreV1().Pods(t.ns).GetLogs(p.Name, opts).Stream(ctx)
			if err != nil {
				if o.Previous && apierrors.IsBadRequest(err) {
					err = failure.Newf(failure.NotPlaced, "pod %s has no previous container of %s: it has not restarted", p.Name, container)
				}
				errs[i] = apiError(t.c, fmt.Sprintf("reading the log of %s/%s", p.Name, container), err)
				return
			}
			defer rc.Close()
			sc := bufio.NewScanner(rc)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				mu.Lock()
				fmt.Fprintf(w, "%s | %s\n", p.Name, sc.Text())
				mu.Unlock()
			}
			if err := sc.Err(); err != nil && ctx.Err() == nil {
				errs[i] = fmt.Errorf("reading the log of %s: %w", p.Name, err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil && o.Follow {
		return nil // Ctrl-C ends a follow
	}
	var msgs []string
	for _, e := range errs {
		if e != nil {
			if len(items) == 1 {
				return e
			}
			msgs = append(msgs, e.Error())
		}
	}
	if len(msgs) > 0 {
		return failure.Newf(failure.ClusterUnreachable, "%d of %d instances' logs could not be read: %s", len(msgs), len(items), strings.Join(msgs, "; "))
	}
	return nil
}
