// Package decisionlog records every outbound decision the sidecar makes: one JSON line per
// decision on a stream (the pod's log), and a bounded in-memory ring the control endpoint
// serves with filters. Writing never blocks a connection: when the stream falls behind, lines
// are counted as dropped instead, and the ring still has them.
package decisionlog

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Entry is one decision.
type Entry struct {
	Seq         uint64    `json:"seq"`
	Time        time.Time `json:"time"`
	Environment string    `json:"environment"`
	// Client is the address the request came from (no port): the pod or process that asked.
	// The sidecar knows no names; a reader that knows the environment's instances (af net
	// log) turns it into Service and Instance.
	Client   string `json:"client,omitempty"`
	Service  string `json:"service,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Via is proxy (explicit, port 3128), transparent (ports 80/443), dns or smtp.
	Via      string `json:"via"`
	Method   string `json:"method,omitempty"`
	Host     string `json:"host"`
	Port     int    `json:"port,omitempty"`
	Path     string `json:"path,omitempty"`
	Rule     string `json:"rule"`
	Mode     string `json:"mode"`
	Allowed  bool   `json:"allowed"`
	Reason   string `json:"reason"`
	Status   int    `json:"status,omitempty"`
	BytesIn  int64  `json:"bytes_in"`
	BytesOut int64  `json:"bytes_out"`
	// DurationMS is how long the request or tunnel lasted.
	DurationMS float64 `json:"duration_ms"`
}

// Log is the ring and the stream.
type Log struct {
	env string
	now func() time.Time

	mu      sync.Mutex
	ring    []Entry
	next    int
	full    bool
	seq     uint64
	dropped uint64
	closed  bool

	// lines carries entries to the writer, which encodes them: the connection that made a
	// decision only hands it over.
	lines chan Entry
	done  chan struct{}
}

// New returns a Log keeping the last size entries and writing JSON lines to out (nil: none).
// Close flushes and stops the writer.
func New(environment string, size int, out io.Writer) *Log {
	if size < 1 {
		size = 1
	}
	l := &Log{env: environment, now: time.Now, ring: make([]Entry, size), done: make(chan struct{})}
	if out != nil {
		l.lines = make(chan Entry, 4096)
		go l.write(out)
	} else {
		close(l.done)
	}
	return l
}

func (l *Log) write(out io.Writer) {
	defer close(l.done)
	w := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(w) // one JSON object and a newline per entry
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case e, ok := <-l.lines:
			if !ok {
				_ = w.Flush()
				return
			}
			_ = enc.Encode(e)
		case <-tick.C:
			_ = w.Flush()
		}
	}
}

// Record adds e, stamping time, sequence and environment, and returns the stored entry.
func (l *Log) Record(e Entry) Entry {
	l.mu.Lock()
	l.seq++
	e.Seq = l.seq
	if e.Time.IsZero() {
		e.Time = l.now().UTC()
	}
	e.Environment = l.env
	l.ring[l.next] = e
	l.next = (l.next + 1) % len(l.ring)
	if l.next == 0 {
		l.full = true
	}
	if l.lines != nil && !l.closed {
		select {
		case l.lines <- e:
		default:
			l.dropped++
		}
	}
	l.mu.Unlock()
	return e
}

// Filter selects entries.
type Filter struct {
	// Blocked keeps only decisions that did not let the connection out.
	Blocked bool
	// Since keeps entries at or after this time.
	Since time.Time
	// Limit keeps the newest Limit entries (0: all).
	Limit int
}

// Query returns the matching entries, oldest first.
func (l *Log) Query(f Filter) []Entry {
	l.mu.Lock()
	var all []Entry
	if l.full {
		all = append(all, l.ring[l.next:]...)
	}
	all = append(all, l.ring[:l.next]...)
	l.mu.Unlock()
	out := make([]Entry, 0, len(all))
	for _, e := range all {
		if f.Blocked && e.Allowed {
			continue
		}
		if !f.Since.IsZero() && e.Time.Before(f.Since) {
			continue
		}
		out = append(out, e)
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out
}

// Dropped returns how many lines the stream could not keep up with.
func (l *Log) Dropped() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Close flushes the stream and stops its writer. Entries recorded after Close still reach the
// ring, not the stream. Close may be called more than once.
func (l *Log) Close() {
	l.mu.Lock()
	if l.lines != nil && !l.closed {
		close(l.lines)
	}
	l.closed = true
	l.mu.Unlock()
	<-l.done
}
