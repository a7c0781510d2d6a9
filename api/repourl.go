package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/fetchhosts"
	"github.com/intendhq/intend/internal/store"
)

// settingErrors validates a patch of settings over base: every key as the
// store does, and a repo_url the patch sets against this server's rules
// too (a local path or file:// URL only with AllowLocalRepos). One field
// error per bad setting.
func (s *Server) settingErrors(base store.Settings, patch map[string]json.RawMessage) []FieldError {
	merged, serrs := store.ApplySettings(base, patch)
	var errs []FieldError
	badURL := false
	for _, se := range serrs {
		errs = append(errs, FieldError{Field: "/settings/" + se.Key, Detail: se.Reason})
		badURL = badURL || se.Key == "repo_url"
	}
	if _, set := patch["repo_url"]; set && !badURL {
		if err := store.CheckRepoURL(merged.RepoURL, s.opts.AllowLocalRepos); err != nil {
			errs = append(errs, FieldError{Field: "/settings/repo_url", Detail: err.Error()})
		} else if _, host, _, ok := fetchhosts.Target(merged.RepoURL); ok && !s.opts.CompileFetchHosts.AllowsName(host) {
			// The name only: its addresses are checked when a compile
			// fetches (they may change in between).
			errs = append(errs, FieldError{Field: "/settings/repo_url", Detail: fmt.Sprintf(
				"names host %q, which this server does not fetch from (intend server --compile-fetch-hosts: %s)",
				host, s.opts.CompileFetchHosts)})
		}
	}
	return errs
}

// refuseGlobalAdminSettings is a 403 when the patch changes one of
// store.GlobalAdminSettings and the caller is not a global admin: an
// environment admin may send them unchanged, not change them. (Creating an
// environment is a global admin's already.)
func refuseGlobalAdminSettings(r *http.Request, base store.Settings, patch map[string]json.RawMessage) error {
	if principal(r).Global() == auth.RoleAdmin {
		return nil
	}
	merged, _ := store.ApplySettings(base, patch)
	if changed := store.GlobalAdminChanges(base, merged); len(changed) > 0 {
		return Forbidden("only a global admin may change %s: it bounds what the environment takes from what all "+
			"environments share", strings.Join(changed, ", "))
	}
	return nil
}

// redactEnv hides the password of a repo_url stored before credentials
// in it were refused: responses never show it.
func redactEnv(e store.Environment) store.Environment {
	e.Settings.RepoURL = store.RedactURL(e.Settings.RepoURL)
	return e
}

// redactCompile is redactEnv for a compile: its repo_url and the git
// messages among its errors.
func redactCompile(c store.Compile) store.Compile {
	c.RepoURL = store.RedactURL(c.RepoURL)
	if c.Errors != nil {
		c.Errors = json.RawMessage(store.RedactURL(string(c.Errors)))
	}
	return c
}
