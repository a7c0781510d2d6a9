// Package oidc verifies bearer JWTs from one OpenID Connect issuer. The
// issuer's discovery document and JWKS are fetched lazily. The keys are
// cached for as long as the JWKS response's Cache-Control max-age says
// (15 minutes without one, between 1 minute and 1 hour whatever it says),
// then fetched again, and a key the issuer no longer publishes is no longer
// trusted; they are also refetched (at most once per 30 s) when a token
// names an unknown kid. Only asymmetric algorithms are accepted: RS*, PS*,
// ES* and EdDSA.
package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	_ "crypto/sha256" // SHA-256 for RS256, PS256, ES256
	_ "crypto/sha512" // SHA-384 and SHA-512 for the others
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	// ErrInvalidToken is wrapped by every error about the token itself.
	ErrInvalidToken = errors.New("invalid token")
	// ErrIssuerUnavailable is wrapped when the issuer's discovery document or
	// JWKS could not be fetched or was unusable.
	ErrIssuerUnavailable = errors.New("oidc issuer unavailable")
)

const (
	maxTokenSize    = 16 << 10
	maxResponseSize = 1 << 20
	fetchTimeout    = 30 * time.Second // for HTTP clients without a timeout

	// DefaultKeyTTL is how long keys are trusted without being fetched
	// again when the JWKS response sets no max-age; MinKeyTTL and
	// MaxKeyTTL bound what a max-age may say (no-store and no-cache count
	// as 0). So a key the issuer retires is refused at most MaxKeyTTL
	// later.
	DefaultKeyTTL = 15 * time.Minute
	MinKeyTTL     = time.Minute
	MaxKeyTTL     = time.Hour
	// MaxStaleKeys is how long keys past their time stay in use while the
	// issuer cannot be reached (counted from their last successful fetch):
	// an outage of the issuer does not lock everyone out at once, and does
	// not keep a retired key trusted for ever either.
	MaxStaleKeys = 24 * time.Hour
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the issuer URL exactly as in tokens' "iss". Discovery is at
	// Issuer without its trailing slash + "/.well-known/openid-configuration".
	Issuer string
	// Audience must be the token's "aud" or one of its elements.
	Audience string
	// HTTPClient fetches discovery and JWKS; default: a 10 s timeout, and
	// redirects followed only to https (or http on loopback).
	HTTPClient *http.Client
	// Leeway is the clock skew allowed on exp, nbf and iat; default 60 s.
	Leeway time.Duration
	// Now is the clock for exp, nbf and iat and for the keys' expiry;
	// default time.Now.
	Now func() time.Time
}

// Verifier verifies tokens of one issuer. It is safe for concurrent use.
type Verifier struct {
	cfg     Config
	refetch time.Duration // least time between JWKS fetches once keys are loaded

	mu        sync.Mutex
	jwksURI   string // from discovery; "" until discovery succeeded
	keys      []key
	loaded    bool      // keys were fetched at least once
	lastFetch time.Time // start of the last fetch attempt
	fetched   time.Time // when the keys were last fetched successfully
	expires   time.Time // when they must be fetched again (their max-age)
	flight    *flight   // the fetch under way, joined by concurrent callers
}

type flight struct {
	done chan struct{}
	err  error
}

// key is a usable verification key from the JWKS.
type key struct {
	kid, alg, kty, crv string
	pub                crypto.PublicKey
}

// algorithm is a JWS algorithm and the key type it needs.
type algorithm struct {
	kty, crv string
	hash     crypto.Hash
	verify   func(pub crypto.PublicKey, h crypto.Hash, input, sig []byte) error
}

var algorithms = map[string]algorithm{
	"RS256": {"RSA", "", crypto.SHA256, verifyPKCS1}, "RS384": {"RSA", "", crypto.SHA384, verifyPKCS1},
	"RS512": {"RSA", "", crypto.SHA512, verifyPKCS1}, "PS256": {"RSA", "", crypto.SHA256, verifyPSS},
	"PS384": {"RSA", "", crypto.SHA384, verifyPSS}, "PS512": {"RSA", "", crypto.SHA512, verifyPSS},
	"ES256": {"EC", "P-256", crypto.SHA256, verifyECDSA}, "ES384": {"EC", "P-384", crypto.SHA384, verifyECDSA},
	"ES512": {"EC", "P-521", crypto.SHA512, verifyECDSA}, "EdDSA": {"OKP", "Ed25519", 0, verifyEd25519},
}

var curves = map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}

// b64 is unpadded base64url that refuses non-canonical trailing bits.
var b64 = base64.RawURLEncoding.Strict()

// New returns a verifier. It does not contact the issuer: discovery happens
// on the first Verify and is retried by a later Verify if it failed, so a
// server can start while its issuer is down. The issuer must be an absolute
// https URL (http only on 127.0.0.1, ::1 or localhost) without query or
// fragment, and the audience must not be empty.
func New(cfg Config) (*Verifier, error) {
	if err := checkURL(cfg.Issuer); err != nil {
		return nil, fmt.Errorf("oidc: issuer: %w", err)
	}
	if u, _ := url.Parse(cfg.Issuer); u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oidc: issuer %q has a query or fragment", cfg.Issuer)
	}
	if cfg.Audience == "" {
		return nil, errors.New("oidc: audience is required")
	}
	if cfg.Leeway < 0 {
		return nil, fmt.Errorf("oidc: negative leeway %v", cfg.Leeway)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return checkURL(r.URL.String()) // no downgrade to http off loopback
		}}
	}
	if cfg.Leeway == 0 {
		cfg.Leeway = 60 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Verifier{cfg: cfg, refetch: 30 * time.Second}, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	h := u.Hostname()
	if u.Scheme == "https" && h != "" || u.Scheme == "http" && (h == "127.0.0.1" || h == "::1" || h == "localhost") {
		return nil
	}
	return fmt.Errorf("%q is not an https URL (http only on loopback)", s)
}

// Claims are a verified token's claims, as decoded from JSON.
type Claims map[string]any

// Subject returns the "sub" claim, or "".
func (c Claims) Subject() string { return c.String("sub") }

// String returns the named claim (see Strings for dotted paths), or "" when
// it is absent or not a string.
func (c Claims) String(name string) string {
	s, _ := c.lookup(name).(string)
	return s
}

// Strings returns the named claim as a list: a string as one element, an
// array of strings as is, anything else nil. A name that is not a claim is
// taken as a dotted path into nested objects, like "realm_access.roles".
func (c Claims) Strings(name string) []string {
	switch v := c.lookup(name).(type) {
	case string:
		return []string{v}
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	return nil
}

func (c Claims) lookup(name string) any {
	if v, ok := c[name]; ok {
		return v
	}
	var cur any = map[string]any(c)
	for _, p := range strings.Split(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidToken}, args...)...)
}

// token is a parsed, not yet verified compact JWS.
type token struct {
	alg, kid            string
	a                   algorithm
	input, payload, sig []byte
}

func parse(raw string) (*token, error) {
	if len(raw) > maxTokenSize {
		return nil, invalid("%d bytes, more than %d", len(raw), maxTokenSize)
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, invalid("%d dot-separated parts, want 3", len(parts))
	}
	var dec [3][]byte
	for i, p := range parts {
		b, err := b64.DecodeString(p)
		if err != nil || strings.ContainsAny(p, "\r\n") { // the decoder skips newlines
			return nil, invalid("part %d is not unpadded base64url", i+1)
		}
		dec[i] = b
	}
	var h struct {
		Alg, Kid, Typ string
		Crit          json.RawMessage
	}
	if err := json.Unmarshal(dec[0], &h); err != nil {
		return nil, invalid("header: %w", err)
	}
	if h.Crit != nil {
		return nil, invalid("header has crit")
	}
	if typ := strings.TrimPrefix(strings.ToLower(h.Typ), "application/"); typ != "" && typ != "jwt" && typ != "at+jwt" {
		return nil, invalid("typ %q, want JWT or at+jwt", h.Typ)
	}
	a, ok := algorithms[h.Alg]
	if !ok {
		return nil, invalid("algorithm %q not allowed", h.Alg)
	}
	return &token{alg: h.Alg, kid: h.Kid, a: a, input: []byte(raw[:len(parts[0])+1+len(parts[1])]),
		payload: dec[1], sig: dec[2]}, nil
}

// Verify checks raw, a compact JWS, and returns its claims. Its errors wrap
// ErrInvalidToken (malformed, algorithm not allowed, no matching key, bad
// signature, wrong iss or aud, expired, not yet valid) or ErrIssuerUnavailable
// (discovery or JWKS could not be fetched).
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	t, err := parse(raw)
	if err != nil {
		return nil, err
	}
	if err := v.fresh(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrIssuerUnavailable, err)
	}
	k, err := v.pick(t)
	if err != nil {
		// Unknown kid: maybe the issuer rotated its keys. refresh is
		// rate-limited once keys are loaded.
		if ferr := v.refresh(ctx); ferr != nil {
			return nil, fmt.Errorf("%w: %w", ErrIssuerUnavailable, ferr)
		}
		if k, err = v.pick(t); err != nil {
			return nil, err
		}
	}
	if err := t.a.verify(k.pub, t.a.hash, t.input, t.sig); err != nil {
		return nil, invalid("%s signature: %w", t.alg, err)
	}
	var c Claims
	if err := json.Unmarshal(t.payload, &c); err != nil || c == nil {
		return nil, invalid("payload is not a JSON object")
	}
	if err := v.check(c); err != nil {
		return nil, err
	}
	return c, nil
}

// check checks the claims. Its errors name what the token holds, never
// what the server expects: they reach whoever sent the token (a 401's
// detail), and the issuer and audience a server trusts are not a
// stranger's to learn.
func (v *Verifier) check(c Claims) error {
	if iss, _ := c["iss"].(string); iss != v.cfg.Issuer {
		return invalid("issuer %q is not the issuer this server trusts", iss)
	}
	if aud := c.Strings("aud"); !slices.Contains(aud, v.cfg.Audience) {
		b, _ := json.Marshal(append([]string{}, aud...))
		return invalid("audience %s does not name this server", b)
	}
	now, leeway := v.cfg.Now(), v.cfg.Leeway
	exp, ok, err := numericDate(c, "exp")
	switch {
	case err != nil:
		return err
	case !ok:
		return invalid("no exp")
	case !now.Before(exp.Add(leeway)):
		return invalid("expired at %s", exp.Format(time.RFC3339))
	}
	if nbf, ok, err := numericDate(c, "nbf"); err != nil {
		return err
	} else if ok && now.Add(leeway).Before(nbf) {
		return invalid("not valid before %s", nbf.Format(time.RFC3339))
	}
	if iat, ok, err := numericDate(c, "iat"); err != nil {
		return err
	} else if ok && iat.After(now.Add(leeway)) {
		return invalid("issued in the future at %s", iat.Format(time.RFC3339))
	}
	return nil
}

// numericDate returns a NumericDate claim and whether it is present.
func numericDate(c Claims, name string) (time.Time, bool, error) {
	v, ok := c[name]
	if !ok {
		return time.Time{}, false, nil
	}
	f, ok := v.(float64)
	if !ok || f < 0 || f > 1e11 {
		return time.Time{}, false, invalid("%s is not a NumericDate", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true, nil
}

// pick returns the one cached key that fits the token's kid and algorithm.
func (v *Verifier) pick(t *token) (key, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var found []key
	for _, k := range v.keys {
		if (t.kid == "" || k.kid == t.kid) && k.kty == t.a.kty && k.crv == t.a.crv && (k.alg == "" || k.alg == t.alg) {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case t.kid == "":
		return key{}, invalid("no kid, and %d %s keys in the JWKS, want exactly 1", len(found), t.alg)
	case len(found) == 0:
		return key{}, invalid("no %s key with kid %q in the JWKS", t.alg, t.kid)
	default:
		return key{}, invalid("%d %s keys with kid %q in the JWKS, want 1", len(found), t.alg, t.kid)
	}
}

// fresh makes sure the keys are not past their max-age: it fetches them
// again when they are. While the issuer cannot be reached, keys past their
// time stay in use up to MaxStaleKeys after their last successful fetch
// (trying again at most every v.refetch); beyond, or before any key was
// fetched, the error is returned.
func (v *Verifier) fresh(ctx context.Context) error {
	v.mu.Lock()
	due := !v.loaded || !v.cfg.Now().Before(v.expires)
	v.mu.Unlock()
	if !due {
		return nil
	}
	err := v.refresh(ctx)
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.cfg.Now()
	switch {
	case v.loaded && now.Before(v.expires):
		return nil // fetched (by this call or a concurrent one)
	case v.loaded && now.Sub(v.fetched) < MaxStaleKeys:
		return nil // the issuer is down: the last keys, for a while
	case err != nil:
		return err
	case v.loaded:
		return fmt.Errorf("the issuer's keys were last fetched %s ago (more than %s) and cannot be fetched now",
			now.Sub(v.fetched).Round(time.Second), MaxStaleKeys)
	}
	return errors.New("no keys fetched")
}

// refresh fetches the keys, or joins a fetch under way. Once keys are loaded
// it does nothing within v.refetch of the last attempt.
func (v *Verifier) refresh(ctx context.Context) error {
	v.mu.Lock()
	f := v.flight
	if f == nil {
		if v.loaded && v.cfg.Now().Sub(v.lastFetch) < v.refetch {
			v.mu.Unlock()
			return nil
		}
		f = &flight{done: make(chan struct{})}
		v.flight, v.lastFetch = f, v.cfg.Now()
		// The fetch outlives a caller that gives up: others may be waiting.
		go v.fetch(context.WithoutCancel(ctx), f)
	}
	v.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (v *Verifier) fetch(ctx context.Context, f *flight) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	keys, uri, ttl, err := v.download(ctx)
	v.mu.Lock()
	if err == nil {
		// The set replaces the one before: a key the issuer no longer
		// publishes is no longer trusted.
		now := v.cfg.Now()
		v.keys, v.jwksURI, v.loaded = keys, uri, true
		v.fetched, v.expires = now, now.Add(ttl)
	}
	v.flight = nil
	v.mu.Unlock()
	f.err = err
	close(f.done)
}

// download runs discovery (unless done before) and fetches the JWKS; it
// returns the keys, the JWKS URI and how long the keys may be kept.
func (v *Verifier) download(ctx context.Context) ([]key, string, time.Duration, error) {
	v.mu.Lock()
	uri := v.jwksURI
	v.mu.Unlock()
	if uri == "" {
		var d struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if _, err := v.get(ctx, strings.TrimSuffix(v.cfg.Issuer, "/")+"/.well-known/openid-configuration", &d); err != nil {
			return nil, "", 0, err
		}
		if d.Issuer != v.cfg.Issuer {
			return nil, "", 0, fmt.Errorf("discovery document names issuer %q, want %q", d.Issuer, v.cfg.Issuer)
		}
		if err := checkURL(d.JWKSURI); err != nil {
			return nil, "", 0, fmt.Errorf("jwks_uri: %w", err)
		}
		uri = d.JWKSURI
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	hdr, err := v.get(ctx, uri, &set)
	if err != nil {
		return nil, "", 0, err
	}
	var keys []key
	for _, raw := range set.Keys {
		if k, ok := parseKey(raw); ok {
			keys = append(keys, k)
		}
	}
	return keys, uri, keyTTL(hdr.Get("Cache-Control")), nil
}

// keyTTL is how long a JWKS response may be kept: its max-age (0 with
// no-store or no-cache), DefaultKeyTTL without one, bounded by MinKeyTTL
// and MaxKeyTTL.
func keyTTL(cacheControl string) time.Duration {
	ttl := DefaultKeyTTL
	for _, d := range strings.Split(cacheControl, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-store", "no-cache":
			ttl = 0
		case "max-age":
			if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 && ttl != 0 {
				ttl = time.Duration(min(n, int64(MaxKeyTTL/time.Second))) * time.Second
			}
		}
	}
	return min(max(ttl, MinKeyTTL), MaxKeyTTL)
}

// get fetches a JSON document into dst and returns the response's header.
func (v *Verifier) get(ctx context.Context, url string, dst any) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize+1))
	if err == nil && len(body) > maxResponseSize {
		err = fmt.Errorf("more than %d bytes", maxResponseSize)
	}
	if err == nil {
		err = json.Unmarshal(body, dst)
	}
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return resp.Header, nil
}

// parseKey returns a JWK as a key, or false if it is not a usable
// signature-verification key (wrong use, unknown type, RSA under 2048 bits...).
func parseKey(raw json.RawMessage) (key, bool) {
	var j struct {
		Kty, Use, Alg, Kid, Crv, N, E, X, Y string
		KeyOps                              []string `json:"key_ops"`
	}
	if json.Unmarshal(raw, &j) != nil || j.Use != "" && j.Use != "sig" ||
		j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return key{}, false
	}
	k := key{kid: j.Kid, alg: j.Alg, kty: j.Kty, crv: j.Crv}
	x, errX := decodeParam(j.X)
	switch j.Kty {
	case "RSA":
		n, errN := decodeParam(j.N)
		e, errE := decodeParam(j.E)
		ei := new(big.Int).SetBytes(e)
		nb := new(big.Int).SetBytes(n)
		if errN != nil || errE != nil || j.Crv != "" || nb.BitLen() < 2048 || nb.BitLen() > 8192 ||
			ei.BitLen() > 31 || ei.Int64() < 3 {
			return key{}, false
		}
		k.pub = &rsa.PublicKey{N: nb, E: int(ei.Int64())}
	case "EC":
		curve := curves[j.Crv]
		y, errY := decodeParam(j.Y)
		if curve == nil || errX != nil || errY != nil {
			return key{}, false
		}
		size := (curve.Params().BitSize + 7) / 8
		if len(x) != size || len(y) != size {
			return key{}, false
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, slices.Concat([]byte{4}, x, y))
		if err != nil {
			return key{}, false
		}
		k.pub = pub
	case "OKP":
		if j.Crv != "Ed25519" || errX != nil || len(x) != ed25519.PublicKeySize {
			return key{}, false
		}
		k.pub = ed25519.PublicKey(x)
	default:
		return key{}, false
	}
	return k, true
}

// decodeParam decodes a JWK parameter, tolerating padding some issuers add.
func decodeParam(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

func digest(h crypto.Hash, input []byte) []byte {
	w := h.New()
	w.Write(input)
	return w.Sum(nil)
}

func verifyPKCS1(pub crypto.PublicKey, h crypto.Hash, input, sig []byte) error {
	return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), h, digest(h, input), sig)
}

func verifyPSS(pub crypto.PublicKey, h crypto.Hash, input, sig []byte) error {
	opts := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}
	return rsa.VerifyPSS(pub.(*rsa.PublicKey), h, digest(h, input), sig, opts)
}

// verifyECDSA checks a JWS ECDSA signature: r||s, each the curve's size.
func verifyECDSA(pub crypto.PublicKey, h crypto.Hash, input, sig []byte) error {
	k := pub.(*ecdsa.PublicKey)
	n := (k.Curve.Params().BitSize + 7) / 8
	if len(sig) != 2*n {
		return fmt.Errorf("%d bytes, want %d", len(sig), 2*n)
	}
	r, s := new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])
	if !ecdsa.Verify(k, digest(h, input), r, s) {
		return errors.New("verification failed")
	}
	return nil
}

func verifyEd25519(pub crypto.PublicKey, _ crypto.Hash, input, sig []byte) error {
	if !ed25519.Verify(pub.(ed25519.PublicKey), input, sig) {
		return errors.New("verification failed")
	}
	return nil
}
