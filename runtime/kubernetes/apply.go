package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// patcher is what every typed client of client-go offers for one kind.
type patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// apply writes obj by server-side apply with field manager "af", taking ownership of the
// fields it names (Force): af is the only writer of what it creates.
func apply[T any](ctx context.Context, c *client, p patcher[T], apiVersion, kind, name string, obj any) (T, error) {
	var zero T
	data, err := json.Marshal(obj)
	if err != nil {
		return zero, fmt.Errorf("encoding %s %s: %w", kind, name, err)
	}
	// The typed object has no TypeMeta set by its builder; apply needs it.
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return zero, fmt.Errorf("encoding %s %s: %w", kind, name, err)
	}
	m["apiVersion"], m["kind"] = apiVersion, kind
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	data, err = json.Marshal(m)
	if err != nil {
		return zero, fmt.Errorf("encoding %s %s: %w", kind, name, err)
	}
	force := true
	out, err := p.Patch(ctx, name, types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return zero, apiError(c, fmt.Sprintf("applying %s %s", kind, name), err)
	}
	return out, nil
}
