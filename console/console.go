// Package console is intend's web console: server-rendered pages under
// /console/, embedded in the binary, that read and write through the same
// REST API a client uses, with the signed-in user's token (so a page
// shows nothing the token may not read, and offers no button its role may
// not press: the API would refuse it anyway). The API is called in
// process, through its handler: no second server, no network hop.
package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure the console.
type Options struct {
	// API is the API's handler, called in process with the user's token.
	API http.Handler
	// TemporalUI is the Temporal Web UI's address ("" when unknown): run
	// pages link their workflow there.
	TemporalUI string
	// Namespace is the Temporal namespace, for those links.
	Namespace string
	// OIDC, when set, adds "Sign in with OpenID Connect" (oidc.go).
	OIDC *OIDCLogin
	Log  *slog.Logger
	// MaxStreamsPerCaller bounds the live pages' event streams one
	// signed-in caller holds at once (default DefaultMaxStreamsPerCaller;
	// one more is a 429: stream.go).
	MaxStreamsPerCaller int
}

// Console serves the pages.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	// csrfKey signs the forms' anti-forgery tokens and the OIDC flow's
	// cookie (per process: a form from before a restart is refused, and
	// shown again).
	csrfKey []byte
	// oidcEnd are the OIDC issuer's endpoints, once discovered.
	oidcMu  sync.Mutex
	oidcEnd endpoints
	// callerStreams counts each caller's live streams (stream.go).
	callerStreams callerStreams
}

// cookieName holds the signed-in user's API token.
const cookieName = "intend_console"

// New returns the console, to be mounted at /console/.
func New(opts Options) (*Console, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	c := &Console{opts: opts, csrfKey: make([]byte, 32), pages: map[string]*template.Template{}}
	if _, err := rand.Read(c.csrfKey); err != nil {
		return nil, err
	}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, err
		}
		c.pages[n[len("templates/"):len(n)-len(".html")]] = t
	}
	return c, nil
}

// Handler returns the console's routes, under /console/.
func (c *Console) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	static, _ := fs.Sub(staticFS, "static")
	r.Handle("/console/static/*", http.StripPrefix("/console/static/", http.FileServer(http.FS(static))))
	r.Get("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	r.Get("/console/login", c.loginPage)
	r.Post("/console/login", c.login)
	r.Post("/console/logout", c.logout)
	c.oidcRoutes(r)
	r.Group(func(r chi.Router) {
		r.Use(c.signedIn)
		r.Get("/console/", c.environments)
		r.Get("/console/env/{env}", c.environment)
		r.Get("/console/env/{env}/resources", c.resources)
		r.Get("/console/env/{env}/resource", c.resource)
		r.Post("/console/env/{env}/deploy", c.deploy)
		r.Post("/console/env/{env}/settings", c.saveSettings)
		c.runRoutes(r)
		c.requestRoutes(r)
		c.compileRoutes(r)
		c.versionRoutes(r)
		c.inventoryRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
	})
	return r
}

// securityHeaders: no framing, no inline script, nothing from elsewhere.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// csrf is the anti-forgery token of a form for the user holding token.
func (c *Console) csrf(token string) string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF refuses a form whose token is not the user's.
func (c *Console) checkCSRF(r *http.Request, token string) bool {
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(c.csrf(token)))
}

// setToken signs the user in (or out, with ""): the token lives in a
// cookie scripts cannot read, sent to /console/ only, never cross-site.
func setToken(w http.ResponseWriter, r *http.Request, token string) {
	ck := &http.Cookie{Name: cookieName, Value: token, Path: "/console/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
	if token == "" {
		ck.MaxAge, ck.Expires = -1, time.Unix(0, 0)
	}
	http.SetCookie(w, ck)
}
