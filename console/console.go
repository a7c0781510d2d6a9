// Package console is intend's web console: server-rendered pages under
// /console/, embedded in the binary, that read and write through the same
// REST API a client uses, with the signed-in user's token (so a page
// shows nothing the token may not read, and offers no button its role may
// not press: the API would refuse it anyway). The API is called in
// process, through its handler: no second server, no network hop.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
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
	// Key signs the forms' anti-forgery tokens, the flash messages and
	// the OIDC sign-in's cookie: at least 32 bytes, the same on every
	// server replica (store.ConsoleKey), so that a form or sign-in begun
	// on one replica is taken by another. Nil: a random key of this
	// process (tests; a single server that may forget forms on restart).
	Key []byte
	// PreviousKeys are keys a rotation replaced (each at least 32 bytes):
	// what they signed is still taken (a form rendered, a sign-in begun
	// before the rotation), nothing is signed with them.
	PreviousKeys [][]byte
	// States records the OIDC sign-ins' states as used, so that each
	// callback is taken once, on whichever replica it lands
	// (store.UseOIDCState). Nil: in this process's memory (tests).
	States StateStore
	Log    *slog.Logger
	// MaxStreamsPerCaller bounds the live pages' event streams one
	// signed-in caller holds at once (default DefaultMaxStreamsPerCaller;
	// one more is a 429: stream.go).
	MaxStreamsPerCaller int
}

// StateStore keeps the OIDC states used, shared by the server replicas.
type StateStore interface {
	// UseOIDCState records hash (a state's SHA-256) as used until
	// expires and reports whether it was unused.
	UseOIDCState(ctx context.Context, hash []byte, expires time.Time) (bool, error)
}

// memoryStates is a StateStore of one process.
type memoryStates struct {
	mu   sync.Mutex
	used map[string]time.Time
}

func (m *memoryStates) UseOIDCState(_ context.Context, hash []byte, expires time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	for h, exp := range m.used {
		if exp.Before(now) {
			delete(m.used, h)
		}
	}
	if _, ok := m.used[string(hash)]; ok {
		return false, nil
	}
	m.used[string(hash)] = expires
	return true, nil
}

// Console serves the pages.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	// csrfKey signs the forms' anti-forgery tokens, the flash messages
	// and the OIDC flow's cookie (Options.Key); keys are the keys whose
	// signatures are taken: csrfKey, then Options.PreviousKeys.
	csrfKey []byte
	keys    [][]byte
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
	c := &Console{opts: opts, csrfKey: opts.Key, pages: map[string]*template.Template{}}
	switch {
	case c.csrfKey == nil:
		c.csrfKey = make([]byte, 32)
		if _, err := rand.Read(c.csrfKey); err != nil {
			return nil, err
		}
	case len(c.csrfKey) < 32:
		return nil, errors.New("console: the key must have at least 32 bytes")
	}
	c.keys = [][]byte{c.csrfKey}
	for _, k := range opts.PreviousKeys {
		if len(k) < 32 {
			return nil, errors.New("console: a previous key must have at least 32 bytes")
		}
		c.keys = append(c.keys, k)
	}
	if c.opts.States == nil {
		c.opts.States = &memoryStates{used: map[string]time.Time{}}
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
	r.Use(securityHeaders, finishWrites)
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
		c.notificationRoutes(r)
		c.versionRoutes(r)
		c.inventoryRoutes(r)
		c.operateRoutes(r)
		c.housekeepingRoutes(r)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "There is no page " + r.URL.Path + "."})
	})
	return r
}

// writeTimeout bounds a console write once its browser has gone.
const writeTimeout = 2 * time.Minute

// finishWrites carries a form's post through once the console has it,
// whether or not its browser waits for the answer: a browser cancels a
// navigation in flight when another starts (a second click, a link
// followed at once), and a write cancelled halfway is one the operator
// believes done (a Resume whose page was left at once left the
// environment halted). Reads still end with their browser.
func finishWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), writeTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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
func (c *Console) csrf(token string) string { return csrfWith(c.csrfKey, token) }

func csrfWith(key []byte, token string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// mac is the signature of parts under the console's key, for a purpose
// of its own (the parts are joined by NULs, which none of them holds:
// they are tokens, base64 and texts of the server's).
func (c *Console) mac(purpose string, parts ...string) string {
	return macWith(c.csrfKey, purpose, parts...)
}

func macWith(key []byte, purpose string, parts ...string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validMAC reports whether got is mac(purpose, parts...) under one of
// the console's keys (the current one or one a rotation replaced).
func (c *Console) validMAC(got, purpose string, parts ...string) bool {
	for _, k := range c.keys {
		if hmac.Equal([]byte(got), []byte(macWith(k, purpose, parts...))) {
			return true
		}
	}
	return false
}

// flashURL is to with a flash message the server chose, signed for the
// signed-in user: a page shows a flash only with its signature, so a
// link cannot make the console say what its author wants (phishing).
func (c *Console) flashURL(r *http.Request, to, msg string) string {
	u := userOf(r)
	if u == nil {
		return to
	}
	sep := "?"
	if strings.Contains(to, "?") {
		sep = "&"
	}
	return to + sep + url.Values{"flash": {msg}, "flash_sig": {c.mac("flash", u.token, msg)}}.Encode()
}

// flashOf is the request's flash message when the server signed it for
// its user, else "".
func (c *Console) flashOf(r *http.Request) string {
	u, q := userOf(r), r.URL.Query()
	msg := q.Get("flash")
	if u == nil || msg == "" || !c.validMAC(q.Get("flash_sig"), "flash", u.token, msg) {
		return ""
	}
	return msg
}

// loginCookie holds a browser's pre-session value: the sign-in form's
// anti-forgery token is bound to it, and a sign-in posted without both
// (a form on another site, which the Strict cookie does not come with,
// or a copied token) is refused. It stops login CSRF: another site
// signing the browser in as the attacker, so that what the user then
// does lands in the attacker's account.
const loginCookie = "intend_console_login"

// loginToken returns the sign-in form's anti-forgery token, setting the
// browser's pre-session cookie when it has none.
func (c *Console) loginToken(w http.ResponseWriter, r *http.Request) string {
	pre := ""
	if ck, err := r.Cookie(loginCookie); err == nil && len(ck.Value) >= 43 {
		pre = ck.Value
	} else {
		pre = randomString()
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: pre, Path: "/console/", HttpOnly: true,
			Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	}
	return c.mac("login", pre)
}

// checkLogin reports whether a sign-in form came with the browser's
// pre-session cookie and the token bound to it.
func (c *Console) checkLogin(r *http.Request) bool {
	ck, err := r.Cookie(loginCookie)
	return err == nil && len(ck.Value) >= 43 && c.validMAC(r.PostFormValue("csrf"), "login", ck.Value)
}

// checkCSRF refuses a form whose token is not the user's.
func (c *Console) checkCSRF(r *http.Request, token string) bool {
	for _, k := range c.keys {
		if hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(csrfWith(k, token))) {
			return true
		}
	}
	return false
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
