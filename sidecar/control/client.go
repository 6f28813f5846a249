package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/antifailure/af/sidecar/decisionlog"
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
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("the sidecar refused %s: %s", path, e.Error)
		}
		return fmt.Errorf("the sidecar answered %s with HTTP %d", path, resp.StatusCode)
	}
	return json.Unmarshal(body, into)
}
