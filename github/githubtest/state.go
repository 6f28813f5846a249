package githubtest

// What the stand-in holds, as tests set and read it.

import (
	"strings"
	"time"
)

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
