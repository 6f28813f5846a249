// Package envid derives the names af gives an environment: its id, its namespace and the
// preview hosts of its web services.
//
// Every derived name is a valid DNS-1123 label of at most 63 characters, the same for the same
// input, and readable where it can be: a pull request of acme/shop gets "shop-pr-12". When the
// input had to be changed to fit (characters a label cannot hold, or more than 63 characters)
// the name carries a short hash of the input, so distinct inputs stay distinct.
//
// The repository's owner is not part of a pull request's id, so preview hosts stay short; the
// runtime records the full repository on the namespace and refuses to reuse a namespace that
// another repository's environment owns.
package envid

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/antifailure/af/failure"
)

// MaxLabel is the longest DNS label.
const MaxLabel = 63

// HashLength is the length of the hash suffix added to names that had to be changed.
const HashLength = 8

var (
	ownerRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,38})$`)
	repoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	hashEnc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
)

// ForPullRequest returns the id of a pull request's environment: <name>-pr-<number>, where
// repository is OWNER/NAME as GitHub writes it.
func ForPullRequest(repository string, number int) (string, error) {
	owner, repo, ok := strings.Cut(repository, "/")
	if !ok || !ownerRE.MatchString(owner) || !repoRE.MatchString(repo) || repo == "." || repo == ".." {
		return "", failure.Newf(failure.NameInvalid, "%q is not a GitHub repository (OWNER/NAME)", repository)
	}
	if number < 1 {
		return "", failure.Newf(failure.NameInvalid, "%d is not a pull request number (1 or more)", number)
	}
	suffix := "-pr-" + strconv.Itoa(number)
	base, lossy := sanitize(repo)
	if base == "" {
		base, lossy = "repo", true
	}
	return fitLabel(base, suffix, MaxLabel, strings.ToLower(repo), lossy), nil
}

// ForPullRequestOfOwner returns the id of a pull request's environment that carries the
// owner: <owner>-<name>-pr-<number>. af gives it when another repository of the same name owns
// ForPullRequest's id on the cluster already, so both can have previews.
func ForPullRequestOfOwner(repository string, number int) (string, error) {
	if _, err := ForPullRequest(repository, number); err != nil {
		return "", err
	}
	owner, repo, _ := strings.Cut(repository, "/")
	full := owner + "-" + repo
	base, lossy := sanitize(full)
	return fitLabel(base, "-pr-"+strconv.Itoa(number), MaxLabel, strings.ToLower(owner+"/"+repo), lossy), nil
}

// ForName returns the id of an environment named freely (a manual run): the name made into a
// label, with a hash when it had to be changed.
func ForName(name string) (string, error) {
	base, lossy := sanitize(name)
	if base == "" {
		return "", failure.Newf(failure.NameInvalid, "%q has no letter or digit to make an environment id from", name)
	}
	return fitLabel(base, "", MaxLabel, name, lossy), nil
}

// Namespace returns the namespace of environment id under prefix.
func Namespace(prefix, id string) (string, error) {
	if err := checkLabel(id); err != nil {
		return "", failure.Newf(failure.NameInvalid, "environment id %q: %s", id, err)
	}
	if prefix != "" && !regexp.MustCompile(`^[a-z][-a-z0-9]*$`).MatchString(prefix) || len(prefix) > 20 {
		return "", failure.Newf(failure.NameInvalid, "namespace prefix %q is not lower-case letters, digits and '-' starting with a letter, at most 20 characters", prefix)
	}
	return prefix + fitLabel(id, "", MaxLabel-len(prefix), prefix+id, false), nil
}

// PreviewHost returns the host a web service of environment id is published at:
// <id>-<service>.<domain>, with the first label cut and hashed when it would exceed 63 characters.
func PreviewHost(id, service, domain string) (string, error) {
	if err := checkLabel(id); err != nil {
		return "", failure.Newf(failure.NameInvalid, "environment id %q: %s", id, err)
	}
	if err := checkLabel(service); err != nil {
		return "", failure.Newf(failure.NameInvalid, "service name %q: %s", service, err)
	}
	domain = strings.TrimSuffix(domain, ".")
	for _, l := range strings.Split(domain, ".") {
		if err := checkLabel(l); err != nil {
			return "", failure.Newf(failure.NameInvalid, "domain %q: %s", domain, err)
		}
	}
	host := fitLabel(id, "-"+service, MaxLabel, id+"-"+service, false) + "." + domain
	if len(host) > 253 {
		return "", failure.Newf(failure.NameInvalid, "preview host %q is longer than 253 characters; use a shorter runtime.domain", host)
	}
	return host, nil
}

// sanitize lower-cases s, turns every run of characters a label cannot hold into one '-', and
// trims '-' from the ends. lossy reports whether anything but case changed.
func sanitize(s string) (out string, lossy bool) {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		if r != '-' {
			lossy = true
		}
		dash = true
	}
	out = b.String()
	if strings.ToLower(s) != out && !lossy {
		// Only '-' changed: runs collapsed or ends trimmed.
		lossy = true
	}
	return out, lossy
}

// fitLabel returns head+tail when that fits in max characters and nothing forces a change;
// otherwise head cut to fit, '-', a hash of hashInput, then tail. When even the tail leaves no
// room, head and tail are cut together.
func fitLabel(head, tail string, max int, hashInput string, force bool) string {
	if !force && len(head)+len(tail) <= max {
		return head + tail
	}
	h := hash(hashInput)
	room := max - len(tail) - 1 - len(h)
	if room < 1 {
		head, tail = head+tail, ""
		room = max - 1 - len(h)
	}
	cut := strings.Trim(head[:min(len(head), room)], "-")
	if cut == "" {
		return h + tail
	}
	return cut + "-" + h + tail
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hashEnc.EncodeToString(sum[:])[:HashLength]
}

// checkLabel reports whether s is a DNS-1123 label.
func checkLabel(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("is empty")
	case len(s) > MaxLabel:
		return fmt.Errorf("is longer than %d characters", MaxLabel)
	case s[0] == '-' || s[len(s)-1] == '-':
		return fmt.Errorf("starts or ends with '-'")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("has %q; a label has lower-case letters, digits and '-'", r)
		}
	}
	return nil
}
