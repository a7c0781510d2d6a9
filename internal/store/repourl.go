package store

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// What a repo_url may name. The server runs the git binary on it, and git
// takes more than URLs: a path on the server's own disk (another
// environment's checkout, the server's data), "<transport>::<address>"
// (the ext transport runs a command), credentials in the userinfo. These
// errors say which rule a repo_url breaks; CheckRepoURL returns them
// wrapped or as they are.
var (
	// ErrLocalRepo is a local path or file:// URL on a server that does
	// not fetch from its own disk.
	ErrLocalRepo = errors.New("a local path needs intend server --allow-local-repos " +
		"(a path or file:// URL reads the server's own disk)")
	// ErrRepoCredentials is a password or token in the URL's userinfo.
	ErrRepoCredentials = errors.New("holds a password or token: put credentials in the server's git " +
		"credential helper or ssh keys, not in the URL")
)

// repoSchemes are the URL schemes a repo_url may have, besides file://
// (a local repository) and the scp-like user@host:path of ssh.
const repoSchemes = "https://, ssh://, git://"

// CheckRepoURL refuses a repo_url the server does not fetch: a remote
// helper ("ext::…", "fd::…"), a scheme other than https, ssh and git, an
// option-like host, user or path, credentials in the URL, and, unless
// allowLocal, a local path or file:// URL. Local is what git takes as
// one: anything without "://" that is not scp-like ([user@]host:path, a
// ':' before any '/'). "" (no repository) passes.
func CheckRepoURL(u string, allowLocal bool) error {
	if u == "" {
		return nil
	}
	if strings.HasPrefix(u, "-") {
		return errors.New("must not start with '-' (git would take it as an option)")
	}
	for _, r := range u {
		if r < 0x20 || r == 0x7f {
			return errors.New("must not hold control characters")
		}
	}
	// git's transport_get: scheme characters, then "::", names a remote
	// helper (git-remote-<name>); "ext::" runs its address as a command.
	if n := schemeLen(u); strings.HasPrefix(u[n:], "::") {
		return fmt.Errorf("names the git transport %q (<transport>::<address>), which the server does not use; "+
			"use %s or user@host:path", u[:n], repoSchemes)
	}
	if i := strings.Index(u, "://"); i >= 0 && schemeLen(u) == i {
		return checkSchemeURL(u, u[:i], allowLocal)
	}
	colon, slash := strings.IndexByte(u, ':'), strings.IndexByte(u, '/')
	if colon < 0 || (slash >= 0 && slash < colon) {
		if !allowLocal {
			return ErrLocalRepo
		}
		return nil
	}
	// scp-like: [user@]host:path, git over ssh.
	host, path := u[:colon], u[colon+1:]
	user := ""
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		user, host = host[:at], host[at+1:]
	}
	switch {
	case host == "":
		return errors.New("names no host (user@host:path)")
	case strings.HasPrefix(host, "-"), strings.HasPrefix(user, "-"), strings.HasPrefix(path, "-"):
		return errors.New("has a host, user or path starting with '-' (ssh would take it as an option)")
	}
	// user:password@host:path is, to git, host "user" and path
	// "password@host:path": a password in the text all the same.
	if at := strings.IndexByte(path, '@'); at >= 0 && user == "" && !strings.Contains(path[:at], "/") {
		rest := path[at+1:]
		if c, s := strings.IndexByte(rest, ':'), strings.IndexByte(rest, '/'); c >= 0 && (s < 0 || c < s) {
			return ErrRepoCredentials
		}
	}
	return nil
}

// checkSchemeURL checks a repo_url with a scheme.
func checkSchemeURL(u, scheme string, allowLocal bool) error {
	switch scheme {
	case "https", "ssh", "git":
	case "file":
		if !allowLocal {
			return ErrLocalRepo
		}
		return nil
	default:
		return fmt.Errorf("has the scheme %q, which the server does not fetch from; use %s or user@host:path",
			scheme, repoSchemes)
	}
	// The authority as git and curl see it: up to the first '/'.
	auth := u[len(scheme)+3:]
	if i := strings.IndexByte(auth, '/'); i >= 0 {
		auth = auth[:i]
	}
	if at := strings.LastIndexByte(auth, '@'); at >= 0 && strings.Contains(auth[:at], ":") {
		return ErrRepoCredentials
	}
	p, err := url.Parse(u)
	if err != nil {
		return errors.New("is not a valid URL")
	}
	if _, ok := p.User.Password(); ok {
		return ErrRepoCredentials
	}
	switch {
	case p.Hostname() == "":
		return errors.New("names no host")
	case strings.HasPrefix(p.Host, "-"), strings.HasPrefix(p.User.Username(), "-"):
		return errors.New("has a host or user starting with '-' (ssh would take it as an option)")
	}
	return nil
}

// schemeLen is the length of the URL scheme characters that u starts
// with, as git reads them: a letter or digit, then also '+', '-', '.'.
func schemeLen(u string) int {
	for i := 0; i < len(u); i++ {
		c := u[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '+' && c != '-' && c != '.') {
			return i
		}
	}
	return len(u)
}

// userinfoPassword is a URL's "user:password@" (the password up to the
// authority's last '@'), anywhere in a text; quotes end it, so that a URL
// in JSON or in git's 'quoted' messages is redacted in place.
var userinfoPassword = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"'\\]*):[^/\s"'\\]*@`)

// RedactURL replaces the password of every URL in s (a repo_url, or
// git's message naming one) by "xxxxx": a repo_url stored before
// credentials in it were refused still shows nowhere.
func RedactURL(s string) string {
	return userinfoPassword.ReplaceAllString(s, "${1}:xxxxx@")
}
