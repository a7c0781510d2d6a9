package oidctest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"maps"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// grant is an authorization code's request, for its redemption.
type grant struct {
	clientID, redirectURI, challenge, nonce string
	claims                                  map[string]any
}

// SetLogin makes /authorize sign in, at once and without asking, the user
// whose claims are given (sub, roles, …): the authorization code flow of
// a browser against this issuer, with PKCE (S256) required. nil makes it
// refuse with error=access_denied.
func (i *Issuer) SetLogin(claims map[string]any) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.login = claims
}

// serveLogin adds /authorize and /token. The ID token /token gives is
// signed like Token's, with aud the client, the request's nonce, and
// the login's claims; a code is redeemed once, by the client and
// redirect URI it was given to, with the verifier of its challenge.
func (i *Issuer) serveLogin(mux *http.ServeMux) {
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || back.Scheme == "" || q.Get("response_type") != "code" || q.Get("client_id") == "" ||
			q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
			http.Error(w, "bad authorization request", http.StatusBadRequest)
			return
		}
		v := back.Query()
		v.Set("state", q.Get("state"))
		i.mu.Lock()
		if i.login == nil {
			v.Set("error", "access_denied")
			v.Set("error_description", "the user said no")
		} else {
			code := random()
			if i.codes == nil {
				i.codes = map[string]grant{}
			}
			i.codes[code] = grant{clientID: q.Get("client_id"), redirectURI: q.Get("redirect_uri"),
				challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), claims: maps.Clone(i.login)}
			v.Set("code", code)
		}
		i.mu.Unlock()
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		i.mu.Lock()
		g, ok := i.codes[r.PostForm.Get("code")]
		delete(i.codes, r.PostForm.Get("code"))
		i.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("client_id") != g.clientID ||
			r.PostForm.Get("redirect_uri") != g.redirectURI || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		claims := g.claims
		claims["aud"], claims["nonce"] = g.clientID, g.nonce
		writeJSON(w, map[string]any{"id_token": i.Token(tb{}, claims), "token_type": "Bearer",
			"expires_in": int(time.Hour / time.Second)})
	})
}

// random is a fresh authorization code.
func random() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tb is the testing.TB of tokens signed while serving: a failure to sign
// is a broken test issuer.
type tb struct{ testing.TB }

func (tb) Helper()                        {}
func (tb) Fatalf(format string, a ...any) { panic("oidctest: " + format) }
func (tb) Fatal(a ...any)                 { panic(a) }
