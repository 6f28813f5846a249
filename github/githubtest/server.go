package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/google/go-github/v62/github"

	"github.com/antifailure/af/github/api"
)

// BotLogin is the author of what the action's GITHUB_TOKEN writes.
const BotLogin = api.ActionsBot

// Comment is an issue comment the stand-in holds.
type Comment struct {
	ID      int64
	Issue   int
	Body    string
	Login   string
	Created time.Time
	Updated time.Time
}

// CheckRun is a check run the stand-in holds, as last written.
type CheckRun struct {
	ID          int64
	Name        string
	HeadSHA     string
	Status      string
	Conclusion  string
	Title       string
	Summary     string
	Text        string
	DetailsURL  string
	Annotations []map[string]any
	Writes      int
}

// Deployment is a deployment with its statuses, oldest first.
type Deployment struct {
	ID          int64
	Ref         string
	SHA         string
	Environment string
	Transient   bool
	AutoMerge   bool
	Contexts    []string
	// Payload is what the request carried (an object, or a string), nil without one.
	Payload  any
	Statuses []DeploymentStatus
}

// DeploymentStatus is one status of a deployment.
type DeploymentStatus struct {
	ID             int64
	State          string
	EnvironmentURL string
	Description    string
	LogURL         string
}

// Call is one request the stand-in answered.
type Call struct {
	Method string
	Path   string // the description's path template
	Status int
}

// Server is the stand-in. Its methods are safe for concurrent use.
type Server struct {
	URL string

	t      testing.TB
	srv    *httptest.Server
	router routers.Router

	mu          sync.Mutex
	nextID      int64
	tokens      map[string]string
	comments    []*Comment
	checks      []*CheckRun
	deployments []*Deployment
	labels      map[int][]string
	files       map[string]string
	pulls       map[int]map[string]any
	perms       map[string]string
	used        int // requests answered or limited, for X-RateLimit-Remaining
	calls       []Call
	refusals    []string
	expectRefus int
	limits      []string
	app         *standinApp
	minted      int
	inflight    map[string]int
	maxInflight map[string]int
	Delay       time.Duration // added before every answer, to widen races in tests
}

// New starts a stand-in for repository owner/repo's API and stops it when the test ends.
// token is accepted as BotLogin's; AddToken adds others.
func New(t testing.TB, token string) *Server {
	t.Helper()
	path, err := subsetPath(Paths)
	if err != nil {
		t.Fatalf("GitHub's REST description: %v", err)
	}
	b, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("loading GitHub's REST description: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.DisableExamplesValidation()); err != nil {
		t.Fatalf("GitHub's REST description does not validate: %v", err)
	}
	s := &Server{t: t, nextID: 1000, tokens: map[string]string{token: BotLogin}, labels: map[int][]string{}, files: map[string]string{}, pulls: map[int]map[string]any{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Start()
	s.URL = s.srv.URL
	doc.Servers = openapi3.Servers{{URL: s.URL}, {URL: s.URL + "/api/v3"}}
	if s.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatalf("routing GitHub's REST description: %v", err)
	}
	t.Cleanup(s.srv.Close)
	return s
}

// Client returns a go-github client of this stand-in for token (package ghclient, rate limits
// honoured), recording every rate-limit wait in slept instead of sleeping.
func (s *Server) Client(t testing.TB, token string, slept *[]time.Duration) *github.Client {
	t.Helper()
	c, _, err := api.New(api.Options{APIURL: s.URL, Token: token, MaxWait: 10 * time.Second,
		Sleep: func(_ context.Context, d time.Duration) error { *slept = append(*slept, d); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// AddToken accepts token as login's.
func (s *Server) AddToken(token, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = login
}

// ExpectRefusals lets the next n refused requests not fail the test (a test of the refusal
// itself).
func (s *Server) ExpectRefusals(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expectRefus += n
}

// Refusals returns why each refused request was refused.
func (s *Server) Refusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refusals...)
}

// Limit makes the next requests refused for rate limits, one per kind given: "429",
// "secondary" (403 with retry-after) or "primary" (403, remaining 0, reset in one second).
func (s *Server) Limit(kinds ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, kinds...)
}

// RateLimitUsed returns how many requests the stand-in has counted and the
// X-RateLimit-Remaining it sent last.
func (s *Server) RateLimitUsed() (used, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used, max(0, 5000-s.used)
}

// Calls returns the requests answered so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// request is one request being answered.
type request struct {
	route  *routers.Route
	params map[string]string
	body   map[string]any
	raw    []byte
	query  url.Values
	login  string
	input  *openapi3filter.RequestValidationInput
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		defer s.mutating(r.URL.Path)()
	}
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	raw, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(raw))
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		s.refuse(w, r, nil, http.StatusNotFound, fmt.Sprintf("%s %s is not an operation af is known to call (%v)", r.Method, r.URL.Path, err))
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true, SkipSettingDefaults: true}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		s.refuse(w, r, route, http.StatusUnprocessableEntity, fmt.Sprintf("%s %s: GitHub's description refuses the request: %s", r.Method, route.Path, brief(err)))
		return
	}
	rq := &request{route: route, params: params, raw: raw, query: r.URL.Query(), input: in}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &rq.body); err != nil {
			s.refuse(w, r, route, http.StatusBadRequest, fmt.Sprintf("%s %s: the body is not a JSON object: %v", r.Method, route.Path, err))
			return
		}
	}
	if why := s.beyondSpec(rq); why != "" {
		s.refuse(w, r, route, http.StatusUnprocessableEntity, fmt.Sprintf("%s %s: %s", r.Method, route.Path, why))
		return
	}
	token := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "token "))
	s.mu.Lock()
	rq.login = s.tokens[token]
	var limit string
	if len(s.limits) > 0 {
		limit, s.limits = s.limits[0], s.limits[1:]
	}
	s.used++
	used := s.used
	s.mu.Unlock()
	if limit != "" {
		s.rateLimit(w, r, route, limit)
		return
	}
	// As GitHub does on every answer: 5,000 an hour, one spent on each request.
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(max(0, 5000-used)))
	w.Header().Set("X-RateLimit-Used", strconv.Itoa(used))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	w.Header().Set("X-RateLimit-Resource", "core")
	if appRoute(route.Path) {
		if why := s.checkJWT(r.Header.Get("Authorization")); why != "" {
			s.answer(w, rq, http.StatusUnauthorized, map[string]any{"message": why, "documentation_url": "https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app"})
			return
		}
	} else if rq.login == "" {
		s.answer(w, rq, http.StatusUnauthorized, map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"})
		return
	}
	status, body := s.handle(rq)
	s.answer(w, rq, status, body)
}

func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request, route *routers.Route, kind string) {
	status := http.StatusForbidden
	msg := "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
	switch kind {
	case "429":
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", "1")
	case "secondary":
		w.Header().Set("Retry-After", "1")
	case "primary":
		msg = "API rate limit exceeded"
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Second).Unix(), 10))
	}
	doc := "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	if kind == "secondary" {
		doc += "#about-secondary-rate-limits" // as GitHub links it; go-github knows it by this
	}
	s.record(r, route, status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": msg, "documentation_url": doc})
}

// beyondSpec checks what GitHub's description cannot say.
func (s *Server) beyondSpec(rq *request) string {
	op := rq.route.Operation
	if op.RequestBody != nil && op.RequestBody.Value != nil && rq.body != nil {
		if mt := op.RequestBody.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil {
			sc := mt.Schema.Value
			if len(sc.Properties) > 0 {
				var unknown []string
				for k := range rq.body {
					if _, ok := sc.Properties[k]; !ok {
						unknown = append(unknown, k)
					}
				}
				sort.Strings(unknown)
				if len(unknown) > 0 {
					return fmt.Sprintf("body fields the operation does not have: %s", strings.Join(unknown, ", "))
				}
			}
		}
	}
	if v, ok := rq.body["head_sha"]; ok {
		if sha, _ := v.(string); strings.TrimSpace(sha) == "" {
			return "head_sha is empty (go-github sends it without omitempty: set it)"
		}
	}
	if out, ok := rq.body["output"].(map[string]any); ok {
		if a, ok := out["annotations"].([]any); ok && len(a) > 50 {
			return fmt.Sprintf("%d annotations in one request; GitHub takes at most 50", len(a))
		}
	}
	for _, k := range []string{"details_url", "environment_url", "log_url", "target_url"} {
		if v, ok := rq.body[k].(string); ok && v != "" {
			if u, err := url.Parse(v); err != nil || !u.IsAbs() || u.Host == "" {
				return fmt.Sprintf("%s %q is not an absolute URL", k, v)
			}
		}
	}
	return ""
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, route *routers.Route, status int, why string) {
	s.mu.Lock()
	s.refusals = append(s.refusals, why)
	expected := s.expectRefus > 0
	if expected {
		s.expectRefus--
	}
	s.mu.Unlock()
	if !expected {
		s.t.Errorf("GitHub stand-in refused a request: %s", why)
	}
	s.record(r, route, status)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": why, "documentation_url": "https://docs.github.com/rest"})
}

func (s *Server) record(r *http.Request, route *routers.Route, status int) {
	p := r.URL.Path
	if route != nil {
		p = route.Path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: p, Status: status})
}

// answer writes body, validating it against the description first.
func (s *Server) answer(w http.ResponseWriter, rq *request, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		s.t.Errorf("GitHub stand-in: %v", err)
	}
	if body == nil {
		b = nil
	}
	h := http.Header{}
	if len(b) > 0 {
		h.Set("Content-Type", "application/json; charset=utf-8")
	}
	if link, ok := body.(paged); ok {
		b, _ = json.Marshal(link.items)
		if link.next != "" {
			h.Set("Link", "<"+link.next+`>; rel="next"`)
		}
	}
	if status < 300 {
		in := &openapi3filter.ResponseValidationInput{RequestValidationInput: rq.input, Status: status, Header: h,
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
		in.SetBodyBytes(b)
		if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
			s.t.Errorf("GitHub stand-in's own answer to %s %s does not match GitHub's description: %v", rq.input.Request.Method, rq.route.Path, err)
		}
	}
	s.record(rq.input.Request, rq.route, status)
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

type paged struct {
	items []any
	next  string
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// example returns a copy of the description's first example of the operation's answer.
func example(rq *request, status int) any {
	resp := rq.route.Operation.Responses.Status(status)
	if resp == nil || resp.Value == nil {
		return nil
	}
	mt := resp.Value.Content.Get("application/json")
	if mt == nil {
		return nil
	}
	var v any = mt.Example
	if v == nil {
		names := make([]string, 0, len(mt.Examples))
		for n := range mt.Examples {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if ex := mt.Examples[n]; ex != nil && ex.Value != nil && ex.Value.Value != nil {
				v = ex.Value.Value
				break
			}
		}
	}
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// overlay sets the fields of over on a copy of base (nested maps merged).
func overlay(base any, over map[string]any) map[string]any {
	m, _ := base.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	for k, v := range over {
		if sub, ok := v.(map[string]any); ok {
			m[k] = overlay(m[k], sub)
			continue
		}
		m[k] = v
	}
	return m
}

func first(v any) any {
	if a, ok := v.([]any); ok && len(a) > 0 {
		return a[0]
	}
	return v
}
