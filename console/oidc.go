package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
)

// OIDCLogin signs users in with an OpenID Connect issuer (the
// authorization code flow with PKCE): the ID token the issuer gives is the
// token the console then uses, and the API accepts it as it accepts any
// JWT of that issuer (server.Config.OIDC).
type OIDCLogin struct {
	// Issuer is the issuer's URL; ClientID the console's client id there
	// (the API's audience).
	Issuer, ClientID string
	// ClientSecret, for a confidential client ("" for a public one).
	ClientSecret string
}

// oidcFlowCookie holds a sign-in in progress: state, nonce, PKCE
// verifier and where to go after, signed. SameSite=Lax: the issuer sends
// the browser back with a cross-site navigation, which a Strict cookie
// would not come with.
const oidcFlowCookie = "intend_console_oidc"

// oidcFlow is one sign-in in progress.
type oidcFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"x"`
	Expires  int64  `json:"e"`
}

// endpoints are the issuer's, from its discovery document (read once).
type endpoints struct {
	authorize string
	token     string
}

func (c *Console) oidcRoutes(r chi.Router) {
	r.Get("/console/oidc/login", c.oidcStart)
	r.Get("/console/oidc/callback", c.oidcCallback)
}

// discover reads the issuer's endpoints, once (a failure is tried again
// on the next sign-in).
func (c *Console) discover(ctx context.Context) (string, string, error) {
	c.oidcMu.Lock()
	defer c.oidcMu.Unlock()
	if c.oidcEnd.token != "" {
		return c.oidcEnd.authorize, c.oidcEnd.token, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		strings.TrimRight(c.opts.OIDC.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return "", "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("the issuer's discovery document: %w", err)
	}
	defer resp.Body.Close()
	var d struct {
		Authorize string `json:"authorization_endpoint"`
		Token     string `json:"token_endpoint"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("the issuer's discovery document: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&d); err != nil || d.Authorize == "" || d.Token == "" {
		return "", "", errors.New("the issuer's discovery document names no authorization and token endpoints")
	}
	c.oidcEnd.authorize, c.oidcEnd.token = d.Authorize, d.Token
	return d.Authorize, d.Token, nil
}

// redirectURI is where the issuer sends the browser back: this server,
// as the browser reached it.
func redirectURI(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/console/oidc/callback"
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sealFlow signs f for its cookie; openFlow checks and reads it.
func (c *Console) sealFlow(f oidcFlow) string {
	b, _ := json.Marshal(f)
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (c *Console) openFlow(v string) (oidcFlow, bool) {
	var f oidcFlow
	body, sig, ok := strings.Cut(v, ".")
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	s, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil {
		return f, false
	}
	signed := false
	for _, k := range c.keys {
		m := hmac.New(sha256.New, k)
		m.Write(b)
		signed = signed || hmac.Equal(m.Sum(nil), s)
	}
	if !signed || json.Unmarshal(b, &f) != nil || time.Now().Unix() > f.Expires {
		return f, false
	}
	return f, true
}

// oidcStart sends the browser to the issuer.
func (c *Console) oidcStart(w http.ResponseWriter, r *http.Request) {
	if c.opts.OIDC == nil {
		c.render(w, r, http.StatusNotFound, "error", page{Title: "Not found", Error: "This server has no OpenID Connect sign-in."})
		return
	}
	authorize, _, err := c.discover(r.Context())
	if err != nil {
		c.render(w, r, http.StatusBadGateway, "login", page{Title: "Sign in", OIDC: true, Error: "The identity provider cannot be reached: " + err.Error()})
		return
	}
	f := oidcFlow{State: randomString(), Nonce: randomString(), Verifier: randomString(),
		Next: safeNext(r.URL.Query().Get("next")), Expires: time.Now().Add(10 * time.Minute).Unix()}
	http.SetCookie(w, &http.Cookie{Name: oidcFlowCookie, Value: c.sealFlow(f), Path: "/console/oidc/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, MaxAge: 600})
	sum := sha256.Sum256([]byte(f.Verifier))
	q := url.Values{"response_type": {"code"}, "client_id": {c.opts.OIDC.ClientID}, "redirect_uri": {redirectURI(r)},
		"scope": {"openid profile email"}, "state": {f.State}, "nonce": {f.Nonce},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"}}
	sep := "?"
	if strings.Contains(authorize, "?") {
		sep = "&"
	}
	http.Redirect(w, r, authorize+sep+q.Encode(), http.StatusFound)
}

// oidcCallback takes the issuer's answer: the code, for an ID token, which
// must carry the flow's nonce; the API then checks its signature, issuer,
// audience and roles (whoami) before the console keeps it.
func (c *Console) oidcCallback(w http.ResponseWriter, r *http.Request) {
	refuse := func(status int, msg string) {
		c.render(w, r, status, "login", page{Title: "Sign in", OIDC: c.opts.OIDC != nil, Next: "/console/", Error: msg})
	}
	if c.opts.OIDC == nil {
		refuse(http.StatusNotFound, "This server has no OpenID Connect sign-in.")
		return
	}
	ck, err := r.Cookie(oidcFlowCookie)
	var f oidcFlow
	var ok bool
	if err == nil {
		f, ok = c.openFlow(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: oidcFlowCookie, Value: "", Path: "/console/oidc/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	switch {
	case !ok:
		refuse(http.StatusBadRequest, "This sign-in was not started here, or it took longer than 10 minutes; sign in again.")
		return
	case !hmac.Equal([]byte(q.Get("state")), []byte(f.State)):
		refuse(http.StatusBadRequest, "The identity provider's answer is not for this sign-in; sign in again.")
		return
	}
	// The state is taken once, on every replica (the cookie alone would
	// let a copied callback URL and cookie be replayed until they expire).
	sum := sha256.Sum256([]byte(f.State))
	fresh, err := c.opts.States.UseOIDCState(r.Context(), sum[:], time.Unix(f.Expires, 0))
	switch {
	case err != nil:
		c.opts.Log.ErrorContext(r.Context(), "console: record an OIDC state", "error", err)
		refuse(http.StatusServiceUnavailable, "The sign-in cannot be completed now; try again in a moment.")
		return
	case !fresh:
		refuse(http.StatusBadRequest, "This sign-in was completed already; sign in again.")
		return
	case q.Get("error") != "":
		refuse(http.StatusUnauthorized, "The identity provider refused the sign-in: "+q.Get("error")+" "+q.Get("error_description"))
		return
	case q.Get("code") == "":
		refuse(http.StatusBadRequest, "The identity provider's answer has no code; sign in again.")
		return
	}
	idToken, err := c.redeem(r, q.Get("code"), f.Verifier)
	if err != nil {
		refuse(http.StatusBadGateway, "The identity provider did not give a token: "+err.Error())
		return
	}
	if nonce, err := tokenNonce(idToken); err != nil || !hmac.Equal([]byte(nonce), []byte(f.Nonce)) {
		refuse(http.StatusBadRequest, "The identity provider's token is not for this sign-in; sign in again.")
		return
	}
	if _, err := c.clientFor(r, idToken).Whoami(r.Context()); err != nil {
		refuse(http.StatusUnauthorized, "The server does not accept this identity: "+problemText(err))
		return
	}
	setToken(w, r, idToken)
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// redeem trades the code for the ID token at the token endpoint.
func (c *Console) redeem(r *http.Request, code, verifier string) (string, error) {
	_, tokenURL, err := c.discover(r.Context())
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI(r)},
		"client_id": {c.opts.OIDC.ClientID}, "code_verifier": {verifier}}
	if c.opts.OIDC.ClientSecret != "" {
		form.Set("client_secret", c.opts.OIDC.ClientSecret)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		IDToken string `json:"id_token"`
		Error   string `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return "", fmt.Errorf("%s: %v", resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || out.IDToken == "" {
		return "", fmt.Errorf("%s %s", resp.Status, out.Error)
	}
	return out.IDToken, nil
}

// tokenNonce reads a JWT's nonce claim (its signature is the API's to
// check).
func tokenNonce(jwt string) (string, error) {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return "", errors.New("not a JWT")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var c struct {
		Nonce string `json:"nonce"`
	}
	return c.Nonce, json.Unmarshal(b, &c)
}
