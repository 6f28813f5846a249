package githubtest

import (
	"bytes"
	"context"
	"encoding/base64"
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

// Comments returns the comments on issue, oldest first.
func (s *Server) Comments(issue int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.comments {
		if c.Issue == issue {
			out = append(out, *c)
		}
	}
	return out
}

// AddComment adds a comment by login, as a person would write it.
func (s *Server) AddComment(issue int, login, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	s.nextID++
	s.comments = append(s.comments, &Comment{ID: s.nextID, Issue: issue, Body: body, Login: login, Created: now, Updated: now})
	return s.nextID
}

// EditComment changes comment id's text as its author editing it later would: GitHub moves
// its updated_at.
func (s *Server) EditComment(id int64, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.comments {
		if c.ID == id {
			c.Body, c.Updated = body, c.Updated.Add(time.Minute)
		}
	}
}

// CheckRuns returns the check runs, oldest first.
func (s *Server) CheckRuns() []CheckRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CheckRun
	for _, c := range s.checks {
		out = append(out, *c)
	}
	return out
}

// Deployments returns the deployments, oldest first.
func (s *Server) Deployments() []Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Deployment
	for _, d := range s.deployments {
		c := *d
		c.Statuses = append([]DeploymentStatus(nil), d.Statuses...)
		out = append(out, c)
	}
	return out
}

// SetLabels sets the labels on issue.
func (s *Server) SetLabels(issue int, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.labels[issue] = append([]string(nil), labels...)
}

// Labels returns the labels on issue.
func (s *Server) Labels(issue int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.labels[issue]...)
}

// SetFile makes path hold content at ref (a branch name or a commit).
func (s *Server) SetFile(ref, path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[ref+":"+path] = content
}

// SetPull records pull request n's state ("open" or "closed"), head commit and merged flag.
func (s *Server) SetPull(n int, state, headSHA string, merged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n] = map[string]any{"state": state, "sha": headSHA, "merged": merged}
}

// SetPullHead records where pull request n's head comes from (a fork's full name) and its base
// commit; SetPull must have recorded it first.
func (s *Server) SetPullHead(n int, headRepo, baseSHA string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[n]["head_repo"], s.pulls[n]["base_sha"] = headRepo, baseSHA
}

// SetPermission records login's permission on the repository: admin, maintain, write, triage,
// read or none (the default: read).
func (s *Server) SetPermission(login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perms == nil {
		s.perms = map[string]string{}
	}
	s.perms[strings.ToLower(login)] = permission
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

func (s *Server) handle(rq *request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := rq.input.Request.Method + " " + rq.route.Path
	owner, repo := rq.params["owner"], rq.params["repo"]
	base := s.URL + "/repos/" + owner + "/" + repo
	now := time.Now().UTC().Format(time.RFC3339)
	switch key {
	case "GET /repos/{owner}/{repo}/issues/{issue_number}/comments":
		n, _ := strconv.Atoi(rq.params["issue_number"])
		per := atoiOr(rq.query.Get("per_page"), 30)
		page := atoiOr(rq.query.Get("page"), 1)
		var all []any
		for _, c := range s.comments {
			if c.Issue == n {
				all = append(all, s.comment(rq, c, base))
			}
		}
		p := paged{items: []any{}}
		lo := (page - 1) * per
		if lo < len(all) {
			hi := min(lo+per, len(all))
			p.items = all[lo:hi]
			if hi < len(all) {
				p.next = fmt.Sprintf("%s/issues/%d/comments?per_page=%d&page=%d", base, n, per, page+1)
			}
		}
		return http.StatusOK, p
	case "POST /repos/{owner}/{repo}/issues/{issue_number}/comments":
		n, _ := strconv.Atoi(rq.params["issue_number"])
		s.nextID++
		t := time.Now().UTC()
		c := &Comment{ID: s.nextID, Issue: n, Body: str(rq.body["body"]), Login: rq.login, Created: t, Updated: t}
		s.comments = append(s.comments, c)
		return http.StatusCreated, s.comment(rq, c, base)
	case "PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}":
		id, _ := strconv.ParseInt(rq.params["comment_id"], 10, 64)
		for _, c := range s.comments {
			if c.ID == id {
				c.Body, c.Updated = str(rq.body["body"]), time.Now().UTC()
				return http.StatusOK, s.comment(rq, c, base)
			}
		}
		return http.StatusNotFound, map[string]any{"message": "Not Found"}
	case "DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}":
		id, _ := strconv.ParseInt(rq.params["comment_id"], 10, 64)
		for i, c := range s.comments {
			if c.ID == id {
				s.comments = append(s.comments[:i], s.comments[i+1:]...)
				return http.StatusNoContent, nil
			}
		}
		return http.StatusNotFound, map[string]any{"message": "Not Found"}
	case "GET /repos/{owner}/{repo}/issues/{issue_number}/labels":
		n, _ := strconv.Atoi(rq.params["issue_number"])
		return http.StatusOK, s.labelList(rq, n, http.StatusOK)
	case "DELETE /repos/{owner}/{repo}/issues/{issue_number}/labels/{name}":
		n, _ := strconv.Atoi(rq.params["issue_number"])
		name := rq.params["name"]
		kept := []string{}
		found := false
		for _, l := range s.labels[n] {
			if l == name {
				found = true
				continue
			}
			kept = append(kept, l)
		}
		if !found {
			return http.StatusNotFound, map[string]any{"message": "Label does not exist", "documentation_url": "https://docs.github.com/rest"}
		}
		s.labels[n] = kept
		return http.StatusOK, s.labelList(rq, n, http.StatusOK)
	case "POST /repos/{owner}/{repo}/check-runs":
		s.nextID++
		c := &CheckRun{ID: s.nextID, Name: str(rq.body["name"]), HeadSHA: str(rq.body["head_sha"]), Status: "queued"}
		c.apply(rq.body)
		s.checks = append(s.checks, c)
		return http.StatusCreated, s.checkRun(rq, c, base, http.StatusCreated, now)
	case "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}":
		id, _ := strconv.ParseInt(rq.params["check_run_id"], 10, 64)
		for _, c := range s.checks {
			if c.ID == id {
				c.apply(rq.body)
				return http.StatusOK, s.checkRun(rq, c, base, http.StatusOK, now)
			}
		}
		return http.StatusNotFound, map[string]any{"message": "Not Found"}
	case "POST /repos/{owner}/{repo}/deployments":
		s.nextID++
		d := &Deployment{ID: s.nextID, Ref: str(rq.body["ref"]), Environment: str(rq.body["environment"]), AutoMerge: true}
		if d.Environment == "" {
			d.Environment = "production"
		}
		d.SHA = d.Ref
		if v, ok := rq.body["transient_environment"].(bool); ok {
			d.Transient = v
		}
		if v, ok := rq.body["auto_merge"].(bool); ok {
			d.AutoMerge = v
		}
		d.Payload = rq.body["payload"]
		if v, ok := rq.body["required_contexts"].([]any); ok {
			d.Contexts = []string{}
			for _, c := range v {
				d.Contexts = append(d.Contexts, str(c))
			}
		}
		s.deployments = append(s.deployments, d)
		return http.StatusCreated, s.deployment(rq, d, base, http.StatusCreated)
	case "GET /repos/{owner}/{repo}/deployments":
		items := []any{}
		for i := len(s.deployments) - 1; i >= 0; i-- { // newest first, as GitHub lists them
			d := s.deployments[i]
			if e := rq.query.Get("environment"); e != "" && e != "none" && e != d.Environment {
				continue
			}
			if sha := rq.query.Get("sha"); sha != "" && sha != "none" && sha != d.SHA {
				continue
			}
			items = append(items, s.deployment(rq, d, base, http.StatusOK))
		}
		return http.StatusOK, paged{items: items}
	case "GET /repos/{owner}/{repo}/deployments/{deployment_id}/statuses":
		id, _ := strconv.ParseInt(rq.params["deployment_id"], 10, 64)
		for _, d := range s.deployments {
			if d.ID != id {
				continue
			}
			per := atoiOr(rq.query.Get("per_page"), 30)
			items := []any{}
			for i := len(d.Statuses) - 1; i >= 0 && len(items) < per; i-- { // newest first
				st := d.Statuses[i]
				ex := first(example(rq, http.StatusOK)) // a fresh copy: overlay writes into it
				items = append(items, overlay(ex, map[string]any{"id": st.ID, "state": st.State, "environment_url": st.EnvironmentURL,
					"description": st.Description, "log_url": st.LogURL, "environment": d.Environment,
					"deployment_url": fmt.Sprintf("%s/deployments/%d", base, d.ID), "repository_url": base,
					"url": fmt.Sprintf("%s/deployments/%d/statuses/%d", base, d.ID, st.ID)}))
			}
			return http.StatusOK, paged{items: items}
		}
		return http.StatusNotFound, map[string]any{"message": "Not Found"}
	case "POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses":
		id, _ := strconv.ParseInt(rq.params["deployment_id"], 10, 64)
		for _, d := range s.deployments {
			if d.ID != id {
				continue
			}
			s.nextID++
			st := DeploymentStatus{ID: s.nextID, State: str(rq.body["state"]), EnvironmentURL: str(rq.body["environment_url"]), Description: str(rq.body["description"]), LogURL: str(rq.body["log_url"])}
			d.Statuses = append(d.Statuses, st)
			ex := example(rq, http.StatusCreated)
			return http.StatusCreated, overlay(ex, map[string]any{"id": st.ID, "state": st.State, "environment_url": st.EnvironmentURL,
				"description": st.Description, "log_url": st.LogURL, "environment": d.Environment,
				"deployment_url": fmt.Sprintf("%s/deployments/%d", base, d.ID), "repository_url": base,
				"url": fmt.Sprintf("%s/deployments/%d/statuses/%d", base, d.ID, st.ID)})
		}
		return http.StatusNotFound, map[string]any{"message": "Not Found"}
	case "GET /repos/{owner}/{repo}/contents/{path}":
		ref := rq.query.Get("ref")
		if ref == "" {
			ref = "main"
		}
		content, ok := s.files[ref+":"+rq.params["path"]]
		if !ok {
			return http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/repos/contents#get-repository-content"}
		}
		ex := first(example(rq, http.StatusOK))
		name := rq.params["path"][strings.LastIndex(rq.params["path"], "/")+1:]
		return http.StatusOK, overlay(ex, map[string]any{"type": "file", "encoding": "base64", "size": len(content), "name": name,
			"path": rq.params["path"], "content": base64.StdEncoding.EncodeToString([]byte(content))})
	case "GET /repos/{owner}/{repo}/pulls/{pull_number}":
		n, _ := strconv.Atoi(rq.params["pull_number"])
		p, ok := s.pulls[n]
		if !ok {
			return http.StatusNotFound, map[string]any{"message": "Not Found"}
		}
		ex := example(rq, http.StatusOK)
		head := map[string]any{"sha": p["sha"]}
		if r, ok := p["head_repo"].(string); ok {
			head["repo"] = map[string]any{"full_name": r}
		}
		out := map[string]any{"number": n, "state": p["state"], "merged": p["merged"], "head": head,
			// requested_teams: the published example's teams predate the description's required type.
			"requested_teams": []any{}}
		if b, ok := p["base_sha"].(string); ok {
			out["base"] = map[string]any{"sha": b}
		}
		return http.StatusOK, overlay(ex, out)
	case "POST /app/installations/{installation_id}/access_tokens":
		if id, _ := strconv.ParseInt(rq.params["installation_id"], 10, 64); s.app == nil || id != s.app.installation {
			return http.StatusNotFound, map[string]any{"message": "Not Found"}
		}
		s.minted++
		ex := example(rq, http.StatusCreated)
		s.nextID++
		token := fmt.Sprintf("ghs_standin%d", s.nextID)
		s.tokens[token] = s.app.slug + "[bot]"
		return http.StatusCreated, overlay(ex, map[string]any{"token": token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}
	if status, body, ok := s.handleMore(rq, key, base); ok {
		return status, body
	}
	return http.StatusNotImplemented, map[string]any{"message": "the stand-in does not answer " + key + " yet"}
}

func (s *Server) comment(rq *request, c *Comment, base string) map[string]any {
	ex := example(&request{route: s.findRoute("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"), input: rq.input}, http.StatusCreated)
	typ := "User"
	if strings.HasSuffix(c.Login, "[bot]") {
		typ = "Bot"
	}
	return overlay(ex, map[string]any{"id": c.ID, "node_id": fmt.Sprintf("IC_%d", c.ID), "body": c.Body,
		"url": fmt.Sprintf("%s/issues/comments/%d", base, c.ID), "issue_url": fmt.Sprintf("%s/issues/%d", base, c.Issue),
		"html_url":   fmt.Sprintf("%s/pull/%d#issuecomment-%d", strings.Replace(base, "/repos/", "/", 1), c.Issue, c.ID),
		"created_at": c.Created.Format(time.RFC3339), "updated_at": c.Updated.Format(time.RFC3339),
		"user": map[string]any{"login": c.Login, "type": typ}})
}

func (s *Server) findRoute(method, path string) *routers.Route {
	r, _ := http.NewRequest(method, s.URL+path, nil)
	route, _, err := s.router.FindRoute(r)
	if err != nil {
		s.t.Errorf("GitHub stand-in: no route for %s %s: %v", method, path, err)
	}
	return route
}

func (s *Server) labelList(rq *request, n, status int) []any {
	ex := first(example(rq, status))
	out := []any{}
	for i, l := range s.labels[n] {
		b, _ := json.Marshal(ex)
		var c any
		_ = json.Unmarshal(b, &c)
		out = append(out, overlay(c, map[string]any{"id": 100 + i, "name": l, "url": s.URL + "/labels/" + url.PathEscape(l)}))
	}
	return out
}

func (c *CheckRun) apply(body map[string]any) {
	c.Writes++
	if v, ok := body["name"].(string); ok {
		c.Name = v
	}
	if v, ok := body["status"].(string); ok {
		c.Status = v
	}
	if v, ok := body["conclusion"].(string); ok {
		c.Conclusion, c.Status = v, "completed"
	}
	if v, ok := body["details_url"].(string); ok {
		c.DetailsURL = v
	}
	if out, ok := body["output"].(map[string]any); ok {
		c.Title, c.Summary, c.Text = str(out["title"]), str(out["summary"]), str(out["text"])
		if a, ok := out["annotations"].([]any); ok {
			for _, x := range a {
				if m, ok := x.(map[string]any); ok {
					c.Annotations = append(c.Annotations, m)
				}
			}
		}
	}
}

func (s *Server) checkRun(rq *request, c *CheckRun, base string, status int, now string) map[string]any {
	ex := example(rq, status)
	var conclusion any
	var completed any
	if c.Conclusion != "" {
		conclusion, completed = c.Conclusion, now
	}
	m := overlay(ex, map[string]any{"id": c.ID, "node_id": fmt.Sprintf("CR_%d", c.ID), "name": c.Name, "head_sha": c.HeadSHA,
		"status": c.Status, "url": fmt.Sprintf("%s/check-runs/%d", base, c.ID), "started_at": now,
		"output": map[string]any{"title": c.Title, "summary": c.Summary, "text": c.Text, "annotations_count": len(c.Annotations)}})
	m["conclusion"], m["completed_at"] = conclusion, completed
	if c.DetailsURL != "" {
		m["details_url"] = c.DetailsURL
	}
	return m
}

func (s *Server) deployment(rq *request, d *Deployment, base string, status int) map[string]any {
	ex := first(example(rq, status))
	out := overlay(ex, map[string]any{"id": d.ID, "node_id": fmt.Sprintf("DE_%d", d.ID), "sha": d.SHA, "ref": d.Ref,
		"environment": d.Environment, "original_environment": d.Environment, "transient_environment": d.Transient,
		"url": fmt.Sprintf("%s/deployments/%d", base, d.ID), "statuses_url": fmt.Sprintf("%s/deployments/%d/statuses", base, d.ID),
		"repository_url": base})
	out["payload"] = map[string]any{}
	if d.Payload != nil {
		out["payload"] = d.Payload
	}
	return out
}

// brief keeps the first line of each of kin-openapi's messages, without the schema it quotes.
func brief(err error) string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(line, "Schema:") || strings.HasPrefix(line, "Value:") {
			break
		}
		if l := strings.TrimSpace(line); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}
