// Package oidctest serves a throwaway OpenID Connect issuer for tests:
// discovery and JWKS over plain http on 127.0.0.1, and tokens signed with the
// issuer's keys.
package oidctest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"maps"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Issuer is an OIDC issuer served on loopback for tests. It has one key per
// JWS algorithm it signed with; the RS256 key is "the current key".
type Issuer struct {
	srv *httptest.Server

	mu      sync.Mutex
	keys    map[string]signer // by algorithm
	down    bool
	fetches int
	// cacheControl is the JWKS response's Cache-Control ("": none).
	cacheControl string
	// login is the user /authorize signs in (its claims); codes are the
	// authorization codes given out and not redeemed yet.
	login map[string]any
	codes map[string]grant
}

type signer struct {
	kid  string
	priv crypto.Signer
}

// NewIssuer starts an issuer with an RSA-2048 RS256 key; it is closed by
// t.Cleanup.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	i := &Issuer{}
	i.Rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": i.URL(), "jwks_uri": i.URL() + "/jwks",
			"authorization_endpoint": i.URL() + "/authorize", "token_endpoint": i.URL() + "/token"})
	})
	i.serveLogin(mux)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		i.fetches++
		var keys []any
		for _, alg := range slices.Sorted(maps.Keys(i.keys)) {
			keys = append(keys, jwk(alg, i.keys[alg]))
		}
		if i.cacheControl != "" {
			w.Header().Set("Cache-Control", i.cacheControl)
		}
		i.mu.Unlock()
		writeJSON(w, map[string]any{"keys": keys})
	})
	i.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.mu.Lock()
		down := i.down
		i.mu.Unlock()
		if down {
			http.Error(w, "issuer down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(i.srv.Close)
	return i
}

// URL returns the issuer URL (no trailing slash).
func (i *Issuer) URL() string { return i.srv.URL }

// Token returns an RS256 token signed with the current key. It fills iss (the
// issuer), iat (now) and exp (now+1h) unless claims has them; claims' values
// win, and a nil value removes the claim.
func (i *Issuer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	return i.TokenWith(t, nil, claims)
}

// TokenWith is Token with header fields too: header["alg"] (RS256 by default;
// also RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA) picks
// the key, generated and published in the JWKS on first use; alg, kid and typ
// "JWT" are filled unless header has them, and a nil value removes a field.
func (i *Issuer) TokenWith(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	alg, _ := header["alg"].(string)
	if alg == "" {
		alg = "RS256"
	}
	i.mu.Lock()
	s, ok := i.keys[alg]
	i.mu.Unlock()
	if !ok {
		s = newSigner(t, alg)
		i.mu.Lock()
		if old, ok := i.keys[alg]; ok { // another goroutine was first
			s = old
		} else {
			i.keys[alg] = s
		}
		i.mu.Unlock()
	}
	now := time.Now()
	h := merge(map[string]any{"alg": alg, "kid": s.kid, "typ": "JWT"}, header)
	c := merge(map[string]any{"iss": i.URL(), "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, claims)
	input := encodeJSON(t, h) + "." + encodeJSON(t, c)
	sig, err := sign(s.priv, alg, []byte(input))
	if err != nil {
		t.Fatalf("oidctest: signing %s: %v", alg, err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// KeyID returns the kid of the current (RS256) key.
func (i *Issuer) KeyID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys["RS256"].kid
}

// PublicKey returns the current (RS256) key's public half.
func (i *Issuer) PublicKey() *rsa.PublicKey {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.keys["RS256"].priv.Public().(*rsa.PublicKey)
}

// Rotate replaces all keys by a new RS256 key with a new kid; the JWKS then
// serves only that key.
func (i *Issuer) Rotate(t testing.TB) {
	t.Helper()
	s := newSigner(t, "RS256")
	i.mu.Lock()
	i.keys = map[string]signer{"RS256": s}
	i.mu.Unlock()
}

// SetDown makes every request fail with 503 Service Unavailable while down.
func (i *Issuer) SetDown(down bool) {
	i.mu.Lock()
	i.down = down
	i.mu.Unlock()
}

// SetCacheControl sets the Cache-Control header of the JWKS responses
// ("max-age=300", "no-store"; "" for none, the default).
func (i *Issuer) SetCacheControl(v string) {
	i.mu.Lock()
	i.cacheControl = v
	i.mu.Unlock()
}

// JWKSFetches returns how many times the JWKS was fetched.
func (i *Issuer) JWKSFetches() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fetches
}

var hashes = map[string]crypto.Hash{"256": crypto.SHA256, "384": crypto.SHA384, "512": crypto.SHA512}

func newSigner(t testing.TB, alg string) signer {
	t.Helper()
	var priv crypto.Signer
	var err error
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		priv, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		priv, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		t.Fatalf("oidctest: unsupported algorithm %q", alg)
	}
	if err != nil {
		t.Fatalf("oidctest: generating a %s key: %v", alg, err)
	}
	return signer{kid: rand.Text()[:12], priv: priv}
}

func sign(priv crypto.Signer, alg string, input []byte) ([]byte, error) {
	if alg == "EdDSA" {
		return ed25519.Sign(priv.(ed25519.PrivateKey), input), nil
	}
	h := hashes[alg[2:]]
	d := h.New()
	d.Write(input)
	digest := d.Sum(nil)
	switch alg[:2] {
	case "RS":
		return priv.Sign(rand.Reader, digest, h)
	case "PS":
		return priv.Sign(rand.Reader, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: h})
	}
	k := priv.(*ecdsa.PrivateKey)
	r, s, err := ecdsa.Sign(rand.Reader, k, digest)
	if err != nil {
		return nil, err
	}
	n := (k.Curve.Params().BitSize + 7) / 8
	sig := make([]byte, 2*n)
	r.FillBytes(sig[:n])
	s.FillBytes(sig[n:])
	return sig, nil
}

func jwk(alg string, s signer) map[string]any {
	m := map[string]any{"kid": s.kid, "alg": alg, "use": "sig"}
	enc := base64.RawURLEncoding.EncodeToString
	switch k := s.priv.Public().(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", enc(k.N.Bytes()), enc(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		b, _ := k.Bytes() // 0x04 || x || y
		n := (len(b) - 1) / 2
		m["kty"], m["crv"], m["x"], m["y"] = "EC", k.Curve.Params().Name, enc(b[1:1+n]), enc(b[1+n:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", enc(k)
	}
	return m
}

// merge returns base overridden by over; nil values in over remove keys.
func merge(base, over map[string]any) map[string]any {
	for k, v := range over {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return base
}

func encodeJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("oidctest: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
