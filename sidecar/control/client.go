package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/antifailure/af/sidecar/decisionlog"
	"github.com/antifailure/af/sidecar/inbox"
)

// Client speaks the control API at Addr (host:port), as af net log and af inbox do through a
// runtime's link to the sidecar.
type Client struct {
	Addr string
	HTTP *http.Client
}

// LogQuery narrows a read of the decision log.
type LogQuery struct {
	Blocked bool
	// Since is a duration back from now ("10m") or an RFC 3339 time; empty reads everything
	// the sidecar kept.
	Since string
	Limit int
}

// Log returns the decisions matching q, oldest first, and how many log lines the sidecar's
// stream dropped.
func (c *Client) Log(ctx context.Context, q LogQuery) ([]decisionlog.Entry, uint64, error) {
	v := url.Values{}
	if q.Blocked {
		v.Set("blocked", "true")
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Entries []decisionlog.Entry `json:"entries"`
		Dropped uint64              `json:"dropped_lines"`
	}
	if err := c.get(ctx, "/v1/log?"+v.Encode(), &out); err != nil {
		return nil, 0, err
	}
	return out.Entries, out.Dropped, nil
}

func (c *Client) get(ctx context.Context, path string, into any) error {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: MaxWait + 10*time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("the sidecar's control API: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("the sidecar's control API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := fmt.Sprintf("the sidecar answered %s with HTTP %d", path, resp.StatusCode)
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = "the sidecar refused " + path + ": " + e.Error
		}
		return &statusError{status: resp.StatusCode, msg: msg}
	}
	return json.Unmarshal(body, into)
}

// InboxQuery narrows the inbox: kind (http or smtp), a recipient, a subject, a host.
type InboxQuery struct {
	Kind, To, Subject, Host string
}

func (q InboxQuery) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"kind": q.Kind, "to": q.To, "subject": q.Subject, "host": q.Host} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Inbox lists the captured messages matching q, oldest first.
func (c *Client) Inbox(ctx context.Context, q InboxQuery) ([]inbox.Message, error) {
	var out struct {
		Messages []inbox.Message `json:"messages"`
	}
	err := c.get(ctx, "/v1/inbox?"+q.values().Encode(), &out)
	return out.Messages, err
}

// Message returns one captured message.
func (c *Client) Message(ctx context.Context, id string) (*inbox.Message, error) {
	var m inbox.Message
	if err := c.get(ctx, "/v1/inbox/"+url.PathEscape(id), &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// ErrNoMessage is Wait's answer when nothing matching arrived in time.
var ErrNoMessage = errors.New("no matching message arrived in time")

// Wait returns the first message matching q that arrives after the message named after ("":
// any, including one already there), or ErrNoMessage after timeout (at most MaxWait).
func (c *Client) Wait(ctx context.Context, q InboxQuery, after string, timeout time.Duration) (*inbox.Message, error) {
	v := q.values()
	v.Set("timeout", timeout.String())
	if after != "" {
		v.Set("after", after)
	}
	var m inbox.Message
	err := c.get(ctx, "/v1/inbox/wait?"+v.Encode(), &m)
	var st *statusError
	if errors.As(err, &st) && st.status == http.StatusGatewayTimeout {
		return nil, ErrNoMessage
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }
