package app

// The teardown journal: each teardown is recorded before anything of it is removed and the
// record is deleted only once GitHub has been told; what shutdown has to leave is recorded too.
// A namespace already removed is invisible to the reaper, so for a teardown cut short between
// the namespace's removal and the comment's rewrite only this record says that work remains.
// The pool's Resume takes the records back into the queue: at start and before every sweep.

import (
	"context"
	"maps"
	"sync"
)

// Journal keeps records by key, surviving the App's restarts where the implementation does:
// runtime/kubernetes's Records keeps them in ConfigMaps of the App's own namespace;
// MemoryJournal only for the process's life (retries of teardowns that ran out of attempts).
type Journal interface {
	Put(ctx context.Context, key string, data []byte) error
	Delete(ctx context.Context, key string) error
	List(ctx context.Context) (map[string][]byte, error)
}

// MemoryJournal is a Journal in memory. The zero value is ready to use.
type MemoryJournal struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Put stores data under key.
func (j *MemoryJournal) Put(_ context.Context, key string, data []byte) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.m == nil {
		j.m = map[string][]byte{}
	}
	j.m[key] = append([]byte(nil), data...)
	return nil
}

// Delete removes key; a key not there is no error.
func (j *MemoryJournal) Delete(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, key)
	return nil
}

// List returns a copy of every record.
func (j *MemoryJournal) List(context.Context) (map[string][]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return maps.Clone(j.m), nil
}
