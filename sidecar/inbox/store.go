// Package inbox keeps what the sidecar captured instead of letting it out: HTTP requests to
// hosts in capture mode, and mail sent to the sidecar's SMTP listener. Credentials are redacted
// before anything is stored, bodies are bounded, and the store keeps a bounded number of
// messages, dropping the oldest.
package inbox

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Kinds of message.
const (
	KindHTTP = "http"
	KindSMTP = "smtp"
)

// Message is one captured request or mail.
type Message struct {
	ID   string    `json:"id"`
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	// Client is the address (no port) the message came from: the pod that sent it. The sidecar
	// knows no names; a reader that knows the environment's instances (af inbox) fills in
	// Service and Instance.
	Client   string `json:"client,omitempty"`
	Service  string `json:"service,omitempty"`
	Instance string `json:"instance,omitempty"`
	// HTTP: the request.
	Method string              `json:"method,omitempty"`
	Host   string              `json:"host,omitempty"`
	Path   string              `json:"path,omitempty"`
	Header map[string][]string `json:"headers,omitempty"`
	// SMTP: the envelope and the subject.
	From    string   `json:"from,omitempty"`
	To      []string `json:"to,omitempty"`
	Subject string   `json:"subject,omitempty"`
	// Body is the request body or the mail's body, up to the store's bound.
	Body          string `json:"body"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
}

// Filter selects messages. Empty fields match everything.
type Filter struct {
	Kind string
	// To matches a recipient containing it (case-insensitive).
	To string
	// Subject matches a subject containing it (case-insensitive).
	Subject string
	// Host matches an HTTP request's host exactly (case-insensitive).
	Host string
}

func (f Filter) match(m Message) bool {
	if f.Kind != "" && m.Kind != f.Kind {
		return false
	}
	if f.Host != "" && !strings.EqualFold(f.Host, m.Host) {
		return false
	}
	if f.Subject != "" && !strings.Contains(strings.ToLower(m.Subject), strings.ToLower(f.Subject)) {
		return false
	}
	if f.To != "" {
		found := false
		for _, to := range m.To {
			found = found || strings.Contains(strings.ToLower(to), strings.ToLower(f.To))
		}
		if !found {
			return false
		}
	}
	return true
}

// Store holds captured messages.
type Store struct {
	max     int
	maxBody int

	mu      sync.Mutex
	msgs    []Message
	seq     int
	changed chan struct{}
}

// NewStore keeps at most max messages with bodies of at most maxBody bytes.
func NewStore(max, maxBody int) *Store {
	return &Store{max: max, maxBody: maxBody, changed: make(chan struct{})}
}

// MaxBody is the largest body kept.
func (s *Store) MaxBody() int { return s.maxBody }

// Add stores m, giving it an id and a time, and wakes waiters.
func (s *Store) Add(m Message) Message {
	if len(m.Body) > s.maxBody {
		m.Body, m.BodyTruncated = m.Body[:s.maxBody], true
	}
	s.mu.Lock()
	s.seq++
	m.ID = fmt.Sprintf("%s-%d", m.Kind, s.seq)
	if m.Time.IsZero() {
		m.Time = time.Now().UTC()
	}
	s.msgs = append(s.msgs, m)
	if len(s.msgs) > s.max {
		s.msgs = append([]Message(nil), s.msgs[len(s.msgs)-s.max:]...)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return m
}

// List returns the matching messages, oldest first.
func (s *Store) List(f Filter) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Message{}
	for _, m := range s.msgs {
		if f.match(m) {
			out = append(out, m)
		}
	}
	return out
}

// Get returns the message with id.
func (s *Store) Get(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.msgs {
		if m.ID == id {
			return m, true
		}
	}
	return Message{}, false
}

// Wait returns the first message matching f that arrived after `after` (a message id, "" for
// any), waiting until one arrives or ctx ends.
func (s *Store) Wait(ctx context.Context, f Filter, after string) (Message, error) {
	for {
		s.mu.Lock()
		ch := s.changed
		passed := after == ""
		for _, m := range s.msgs {
			if passed && f.match(m) {
				s.mu.Unlock()
				return m, nil
			}
			if m.ID == after {
				passed = true
			}
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// sensitive names headers whose values are never stored.
var sensitive = []string{"authorization", "cookie", "token", "secret", "password", "passwd", "api-key", "apikey", "signature", "credential", "session"}

// Redact returns a copy of h with credential-bearing values replaced.
func Redact(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		lk := strings.ToLower(k)
		red := false
		for _, s := range sensitive {
			red = red || strings.Contains(lk, s)
		}
		if red {
			out[k] = []string{"[redacted]"}
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}
