package console

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
)

// inProcess is a RoundTripper that serves a request with the API's
// handler in this process, as if from the browser's address.
type inProcess struct {
	api        http.Handler
	remoteAddr string
}

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	req.RemoteAddr = t.remoteAddr
	// The request's context comes from the console's, which holds the
	// console router's route context: chi would take it up and route the
	// API call as the console's page (its path and method). The API routes
	// afresh.
	req = req.WithContext(context.WithValue(req.Context(), chi.RouteCtxKey, nil))
	rec := httptest.NewRecorder()
	t.api.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// user is the signed-in user of a request.
type user struct {
	token  string
	api    *client.Client
	whoami client.Whoami
}

type userKey struct{}

func userOf(r *http.Request) *user { u, _ := r.Context().Value(userKey{}).(*user); return u }

// clientFor is the API's client for a request, with token.
func (c *Console) clientFor(r *http.Request, token string) *client.Client {
	api := client.New("http://" + r.Host)
	api.Token = token
	api.HTTP = &http.Client{Transport: inProcess{api: c.opts.API, remoteAddr: r.RemoteAddr}}
	return api
}

// signedIn lets a request through with its user, or sends the browser to
// the sign-in page (and back here after).
func (c *Console) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(cookieName)
		if err != nil || ck.Value == "" {
			http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		u := &user{token: ck.Value, api: c.clientFor(r, ck.Value)}
		if u.whoami, err = u.api.Whoami(r.Context()); err != nil {
			if client.HasStatus(err, http.StatusUnauthorized) {
				setToken(w, r, "")
				http.Redirect(w, r, "/console/login?expired=1&next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.fail(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}

// roleIn is the user's role in the environment named env.
func (u *user) roleIn(env string) string {
	if r, ok := u.whoami.Environments[env]; ok {
		return r
	}
	return u.whoami.Role
}

// may reports whether the user's role in env grants need, as the API
// ranks roles (auth.Role.Grants: read < operator < author < admin;
// executor and none press no console button).
func (u *user) may(env string, need auth.Role) bool {
	have, err := auth.ParseRole(u.roleIn(env))
	return err == nil && have.Grants(need)
}

// safeNext is where a sign-in goes after: a console path, never another
// site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/console/"
	}
	return next
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	p := page{Title: "Sign in", Next: safeNext(r.URL.Query().Get("next")), OIDC: c.opts.OIDC != nil}
	if r.URL.Query().Get("expired") != "" {
		p.Error = "Your token is no longer valid (expired or revoked). Sign in again."
	}
	p.CSRF = c.loginToken(w, r)
	c.render(w, r, http.StatusOK, "login", p)
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	p := page{Title: "Sign in", Next: next, OIDC: c.opts.OIDC != nil}
	p.CSRF = c.loginToken(w, r)
	if token == "" {
		p.Error = "Paste an API token (intend token create prints one)."
		c.render(w, r, http.StatusUnprocessableEntity, "login", p)
		return
	}
	if !c.checkLogin(r) {
		p.Error = "This sign-in form is stale or was not sent from this console's own page; sign in again."
		c.render(w, r, http.StatusForbidden, "login", p)
		return
	}
	if _, err := c.clientFor(r, token).Whoami(r.Context()); err != nil {
		p.Error = problemText(err)
		if client.HasStatus(err, http.StatusUnauthorized) {
			p.Error = "That token is not valid (unknown, expired or revoked)."
		}
		c.render(w, r, http.StatusUnauthorized, "login", p)
		return
	}
	setToken(w, r, token)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil && !c.checkCSRF(r, ck.Value) {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Sign out", Error: "The form is stale; sign out again."})
		return
	}
	setToken(w, r, "")
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// problemText is what an error from the API says, for a page: a problem's
// title and detail, and each field's error.
func problemText(err error) string {
	var p *client.Problem
	if !errors.As(err, &p) {
		return err.Error()
	}
	msg := p.Title
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	for _, f := range p.Errors {
		msg += "; " + strings.TrimPrefix(f.Field, "/") + ": " + f.Detail
	}
	return msg
}
