package githubtest

// The answers: each route of the REST description the stand-in implements, and the objects
// it returns.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/routers"
)

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
