package githubtest

// The GitHub App side of the stand-in: the App's JWT checked the way GitHub checks it (RS256,
// signed by the App's key, iss the App's id, at most ten minutes long, not expired), the App
// and its one installation, the installation of a repository, the open pull requests, and a
// count of mutations sent at once to one repository.

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

type standinApp struct {
	id           int64
	slug         string
	key          *rsa.PublicKey
	installation int64
	repos        map[string]bool // OWNER/NAME, lower case
}

// SetApp makes the stand-in know a GitHub App: its id, slug (the bot is "<slug>[bot]"), the
// public half of its key, and one installation on repositories.
func (s *Server) SetApp(id int64, slug string, key *rsa.PublicKey, installation int64, repositories ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &standinApp{id: id, slug: slug, key: key, installation: installation, repos: map[string]bool{}}
	for _, r := range repositories {
		a.repos[strings.ToLower(r)] = true
	}
	s.app = a
}

// TokensMinted counts the installation tokens the stand-in issued.
func (s *Server) TokensMinted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.minted
}

// MaxConcurrentMutations is the most requests other than GET that were in flight at once for
// one repository (or for the App's own paths, keyed "app").
func (s *Server) MaxConcurrentMutations() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.maxInflight {
		out[k] = v
	}
	return out
}

func (s *Server) mutating(path string) func() {
	key := "app"
	if rest, ok := strings.CutPrefix(strings.TrimPrefix(path, "/api/v3"), "/repos/"); ok {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) >= 2 {
			key = strings.ToLower(parts[0] + "/" + parts[1])
		}
	}
	s.mu.Lock()
	if s.inflight == nil {
		s.inflight, s.maxInflight = map[string]int{}, map[string]int{}
	}
	s.inflight[key]++
	s.maxInflight[key] = max(s.maxInflight[key], s.inflight[key])
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.inflight[key]--
		s.mu.Unlock()
	}
}

// appRoute says whether a path authenticates with the App's JWT rather than a token.
func appRoute(path string) bool {
	return path == "/app" || strings.HasPrefix(path, "/app/") || path == "/repos/{owner}/{repo}/installation"
}

// checkJWT returns why GitHub would refuse the Authorization header as the App's JWT, "" when
// it would accept it.
func (s *Server) checkJWT(header string) string {
	s.mu.Lock()
	app := s.app
	s.mu.Unlock()
	if app == nil {
		return "the stand-in knows no GitHub App (SetApp)"
	}
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		return "A JSON web token could not be decoded (no Bearer token)"
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return "A JSON web token could not be decoded"
	}
	var head struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat int64           `json:"iat"`
		Exp int64           `json:"exp"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &head) != nil || json.Unmarshal(cb, &claims) != nil {
		return "A JSON web token could not be decoded"
	}
	if head.Alg != "RS256" {
		return fmt.Sprintf("the JWT's algorithm is %q; GitHub requires RS256", head.Alg)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(app.key, crypto.SHA256, sum[:], sig) != nil {
		return "A JSON web token could not be decoded (the signature is not the App's key)"
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(app.id, 10) {
		return fmt.Sprintf("the JWT's iss %s is not the App's id %d", iss, app.id)
	}
	now := time.Now().Unix()
	switch {
	case claims.Exp <= now:
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	case claims.Iat > now+60:
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	case claims.Exp-claims.Iat > 600:
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	return ""
}

// handleMore answers the operations of this file; ok is false for any other.
func (s *Server) handleMore(rq *request, key, base string) (int, any, bool) {
	owner, repo := rq.params["owner"], rq.params["repo"]
	switch key {
	case "GET /app":
		ex := example(rq, http.StatusOK)
		return http.StatusOK, overlay(ex, map[string]any{"id": s.app.id, "slug": s.app.slug, "name": s.app.slug}), true
	case "GET /app/installations":
		ex := first(example(rq, http.StatusOK))
		// GitHub's own example account fails its schema: an installation's account may be null.
		return http.StatusOK, []any{overlay(ex, map[string]any{"id": s.app.installation, "app_id": s.app.id, "app_slug": s.app.slug, "account": nil})}, true
	case "GET /repos/{owner}/{repo}/installation":
		if !s.app.repos[strings.ToLower(owner+"/"+repo)] {
			return http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app"}, true
		}
		ex := example(rq, http.StatusOK)
		return http.StatusOK, overlay(ex, map[string]any{"id": s.app.installation, "app_id": s.app.id, "app_slug": s.app.slug, "account": nil}), true
	case "GET /repos/{owner}/{repo}/collaborators/{username}/permission":
		perm := s.perms[strings.ToLower(rq.params["username"])]
		if perm == "" {
			perm = "read"
		}
		role := perm
		if perm == "none" {
			role = "read"
		}
		ex := example(rq, http.StatusOK)
		return http.StatusOK, overlay(ex, map[string]any{"permission": perm, "role_name": role, "user": map[string]any{"login": rq.params["username"], "role_name": role}}), true
	case "GET /repos/{owner}/{repo}/pulls":
		state := rq.query.Get("state")
		if state == "" {
			state = "open"
		}
		var nums []int
		for n, p := range s.pulls {
			if state == "all" || p["state"] == state {
				nums = append(nums, n)
			}
		}
		sort.Sort(sort.Reverse(sort.IntSlice(nums))) // newest first, as GitHub lists them
		per := atoiOr(rq.query.Get("per_page"), 30)
		page := atoiOr(rq.query.Get("page"), 1)
		p := paged{items: []any{}}
		if lo := (page - 1) * per; lo < len(nums) {
			hi := min(lo+per, len(nums))
			for _, n := range nums[lo:hi] {
				pr := s.pulls[n]
				ex := first(example(rq, http.StatusOK)) // a fresh copy: overlay writes into it
				p.items = append(p.items, overlay(ex, map[string]any{"number": n, "state": pr["state"], "head": map[string]any{"sha": pr["sha"]},
					"url":             fmt.Sprintf("%s/pulls/%d", base, n),
					"requested_teams": []any{}})) // GitHub's example team lacks its required type
			}
			if hi < len(nums) {
				p.next = fmt.Sprintf("%s/pulls?state=%s&per_page=%d&page=%d", base, state, per, page+1)
			}
		}
		return http.StatusOK, p, true
	}
	return 0, nil, false
}
