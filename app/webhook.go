package app

// The endpoint: it verifies X-Hub-Signature-256 in constant time before it reads
// anything else, bounds the body, reads JSON and form-encoded deliveries, hands a closed pull
// request's teardown to the intake (which records it durably before the 202), and cancels a
// waiting teardown when the pull request is reopened. Nothing here has to be exact about
// repeats: a delivery id seen before is acknowledged without work as a cheap first filter, but
// what makes a replay or a late delivery harmless is that the teardown reads the pull request's
// state again before it removes anything.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sync"

	"github.com/antifailure/af/failure"
	"github.com/antifailure/af/github/delivery"
	ghevent "github.com/antifailure/af/github/event"
	"github.com/antifailure/af/github/report"
)

// MaxBody is the largest delivery read: GitHub sends at most 25 MB.
const MaxBody = 25 << 20

// Queue takes teardowns; Enqueue must not block for long (the delivery waits on it).
type Queue interface {
	Enqueue(Teardown) error
}

// Taker is what the webhook hands its work to: a closed pull request's teardown in, and out
// again the waiting teardown of a pull request that was reopened.
type Taker interface {
	Queue
	Cancel(repository string, pullRequest int) error
}

// Webhook is the POST /webhook handler.
type Webhook struct {
	secret []byte
	queue  Taker
	log    *slog.Logger
	seen   *deliveries
	// Observe, when set, is told of every delivery: its event, action and result (metrics).
	Observe func(event, action, result string)
}

// NewWebhook returns the handler. An empty secret is refused: go-github's own validation, and
// any other, accepts every payload without one.
func NewWebhook(secret []byte, q Taker, log *slog.Logger) (*Webhook, error) {
	if len(secret) == 0 {
		return nil, failure.Newf(failure.AppConfigInvalid, "no webhook secret: without one any caller could tear environments down (set AF_APP_WEBHOOK_SECRET to the App's webhook secret)")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Webhook{secret: secret, queue: q, log: log, seen: newDeliveries(10000)}, nil
}

// Outcome of one delivery, for logs and metrics.
const (
	Queued     = "queued"
	Cancelled  = "cancelled"
	Duplicate  = "duplicate"
	Ignored    = "ignored"
	Ack        = "acknowledged"
	BadSig     = "bad-signature"
	BadRequest = "bad-request"
)

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var action string
	result, status, msg := h.handle(w, r, &action)
	delivery, event := r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-GitHub-Event")
	if result == BadSig {
		delivery, event = "", "" // unsigned: nothing it says is repeated
	}
	h.log.Info("delivery", "delivery", delivery, "event", event, "action", action, "result", result, "status", status)
	if h.Observe != nil {
		h.Observe(event, action, result)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	if msg != "" {
		fmt.Fprintln(w, msg)
	}
}

func (h *Webhook) handle(w http.ResponseWriter, r *http.Request, action *string) (string, int, string) {
	if r.Method != http.MethodPost {
		return BadRequest, http.StatusMethodNotAllowed, "POST only"
	}
	if r.ContentLength > MaxBody {
		return BadRequest, http.StatusBadRequest, "the body is over 25 MB, the most GitHub sends: not a delivery"
	}
	body, err := readBody(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return BadRequest, http.StatusBadRequest, "the body is over 25 MB, the most GitHub sends: not a delivery"
		}
		return BadRequest, http.StatusBadRequest, "the body could not be read"
	}
	// The signature first: nothing about an unsigned body is looked at, or logged.
	if !delivery.Verify(h.secret, body, r.Header.Get(delivery.SignatureHeader)) {
		return BadSig, http.StatusUnauthorized, "X-Hub-Signature-256 is missing or wrong"
	}
	delivery := r.Header.Get("X-GitHub-Delivery")
	event := r.Header.Get("X-GitHub-Event")
	if delivery == "" || event == "" {
		return BadRequest, http.StatusBadRequest, "X-GitHub-Delivery and X-GitHub-Event are required"
	}
	payload, err := jsonPayload(r.Header.Get("Content-Type"), body)
	if err != nil {
		return BadRequest, http.StatusBadRequest, err.Error()
	}
	switch event {
	case "ping", "installation", "installation_repositories":
		if !json.Valid(payload) {
			return BadRequest, http.StatusBadRequest, "the payload is not JSON"
		}
		return Ack, http.StatusAccepted, ""
	case "pull_request":
	default:
		return Ignored, http.StatusNoContent, ""
	}
	ev, err := ghevent.DecodePullRequest(payload)
	*action = ev.Action
	if err != nil && !errors.Is(err, ghevent.ErrNoPullRequest) {
		return BadRequest, http.StatusBadRequest, err.Error()
	}
	if ev.Action != "closed" && ev.Action != "reopened" {
		return Ignored, http.StatusNoContent, "" // the action brings environments up
	}
	if err != nil || ev.FullName == "" || ev.Number < 1 {
		return BadRequest, http.StatusBadRequest, "the pull_request payload names no repository or number"
	}
	if ev.Action == "reopened" {
		// A teardown still waiting or retrying for it is dropped: the action brings the
		// environment up again. One already running reads the state again and stops.
		if err := h.queue.Cancel(ev.FullName, ev.Number); err != nil {
			return BadRequest, http.StatusServiceUnavailable, "the waiting teardown could not be cancelled: " + err.Error()
		}
		return Cancelled, http.StatusAccepted, ""
	}
	if !h.seen.add(delivery) {
		return Duplicate, http.StatusAccepted, ""
	}
	td := Teardown{Delivery: delivery, Repository: ev.FullName, PullRequest: ev.Number,
		HeadSHA: ev.HeadSHA, Merged: ev.Merged, Reason: report.ReasonClosed, InstallationID: ev.Installation}
	if td.Merged {
		td.Reason = report.ReasonMerged
	}
	if err := h.queue.Enqueue(td); err != nil {
		h.seen.remove(delivery) // let GitHub's redelivery try again
		return BadRequest, http.StatusServiceUnavailable, "the teardown queue refused the work: " + err.Error()
	}
	return Queued, http.StatusAccepted, ""
}

// readBody reads the body, at most MaxBody: into a buffer of its announced length when it has
// one (GitHub's deliveries do), which holds a 25 MB body in 25 MB instead of the doubling
// buffer io.ReadAll grows; else (chunked) with io.ReadAll.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, MaxBody)
	if r.ContentLength <= 0 {
		return io.ReadAll(rd)
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(rd, body); err != nil {
		return nil, err
	}
	return body, nil
}

// jsonPayload returns the JSON of a delivery: the body itself, or its payload= field when
// the App delivers form-encoded.
func jsonPayload(contentType string, body []byte) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("Content-Type %q is not application/json or application/x-www-form-urlencoded", contentType)
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil || v.Get("payload") == "" {
			return nil, errors.New("a form-encoded delivery without a payload field")
		}
		return []byte(v.Get("payload")), nil
	}
	return nil, fmt.Errorf("Content-Type %q is not application/json or application/x-www-form-urlencoded", contentType)
}

// deliveries remembers the last n delivery ids, in memory: a redelivery while the App runs is
// acknowledged and does nothing. After a restart the ids are gone; teardown is idempotent, so a
// redelivery then runs a teardown that finds nothing left to do.
type deliveries struct {
	mu    sync.Mutex
	max   int
	order []string
	ids   map[string]bool
}

func newDeliveries(max int) *deliveries { return &deliveries{max: max, ids: map[string]bool{}} }

func (d *deliveries) add(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ids[id] {
		return false
	}
	d.ids[id] = true
	d.order = append(d.order, id)
	if len(d.order) > d.max {
		delete(d.ids, d.order[0])
		d.order = d.order[1:]
	}
	return true
}

// remove forgets id (a delivery the queue refused), from the order too: a stale entry there
// would later evict the id of a redelivery that was accepted.
func (d *deliveries) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.ids, id)
	for i := len(d.order) - 1; i >= 0; i-- { // it is almost always the newest
		if d.order[i] == id {
			d.order = append(d.order[:i], d.order[i+1:]...)
			break
		}
	}
}
