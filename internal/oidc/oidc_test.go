package oidc

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/oidc/oidctest"
)

const aud = "intend"

func newVerifier(t testing.TB, issuer string) *Verifier {
	t.Helper()
	v, err := New(Config{Issuer: issuer, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// claims returns valid claims (but iss, iat and exp, which oidctest fills)
// overridden by key/value pairs.
func claims(kv ...any) map[string]any {
	c := map[string]any{"aud": aud, "sub": "alice"}
	for i := 0; i < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

var enc = base64.RawURLEncoding.EncodeToString

// forge gives genuine token tok another header and signature.
func forge(t *testing.T, tok string, header map[string]any, sign func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	input := enc(h) + "." + strings.Split(tok, ".")[1]
	return input + "." + enc(sign([]byte(input)))
}

// resign replaces tok's signature by edit(signature).
func resign(t *testing.T, tok string, edit func([]byte) []byte) string {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	sig, err := b64.DecodeString(tok[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return tok[:i+1] + enc(edit(sig))
}

// swapPayload returns tok with the payload of from.
func swapPayload(tok, from string) string {
	p := strings.Split(tok, ".")
	p[1] = strings.Split(from, ".")[1]
	return strings.Join(p, ".")
}

func TestVerify(t *testing.T) {
	t.Parallel()
	iss, other := oidctest.NewIssuer(t), oidctest.NewIssuer(t)
	v := newVerifier(t, iss.URL())
	now := time.Now()
	good := iss.Token(t, claims())
	pubPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(iss.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	type tc struct {
		name, why, token string
		wantErr          error  // nil: accepted
		msg              string // in the error
	}
	cases := []tc{
		{"kid absent", "one RS256 key in the JWKS is enough", iss.TokenWith(t, map[string]any{"kid": nil}, claims()), nil, ""},
		{"typ at+jwt", "RFC 9068 access tokens", iss.TokenWith(t, map[string]any{"typ": "at+JWT"}, claims()), nil, ""},
		{"typ absent", "typ is optional", iss.TokenWith(t, map[string]any{"typ": nil}, claims()), nil, ""},
		{"aud array", "aud may be an array containing ours", iss.Token(t, claims("aud", []string{"x", aud})), nil, ""},
		{"exp within leeway", "60 s of clock skew allowed", iss.Token(t, claims("exp", now.Add(-30*time.Second).Unix())), nil, ""},
		{"wrong issuer", "iss names another issuer", iss.Token(t, claims("iss", "https://evil.example")), ErrInvalidToken, `issuer "https://evil.example"`},
		{"wrong audience", "aud lacks ours", iss.Token(t, claims("aud", []string{"a", "b"})), ErrInvalidToken, `audience ["a","b"] does not name this server`},
		{"no audience", "aud is required", iss.Token(t, claims("aud", nil)), ErrInvalidToken, "audience [] does not name"},
		{"expired", "exp long past", iss.Token(t, claims("exp", 1700000000)), ErrInvalidToken, "expired at 2023-11-14T22:13:20Z"},
		{"no exp", "exp is required", iss.Token(t, claims("exp", nil)), ErrInvalidToken, "no exp"},
		{"exp string", "exp must be numeric", iss.Token(t, claims("exp", "tomorrow")), ErrInvalidToken, "exp is not a NumericDate"},
		{"nbf future", "not valid yet", iss.Token(t, claims("nbf", now.Add(5*time.Minute).Unix())), ErrInvalidToken, "not valid before"},
		{"iat future", "issued in the future", iss.Token(t, claims("iat", now.Add(5*time.Minute).Unix())), ErrInvalidToken, "issued in the future"},
		{"bad signature", "a flipped signature byte", resign(t, good, func(s []byte) []byte { s[10] ^= 1; return s }), ErrInvalidToken, "RS256 signature"},
		{"tampered payload", "payload of another token", swapPayload(good, iss.Token(t, claims("sub", "mallory"))), ErrInvalidToken, "RS256 signature"},
		{"es256 short signature", "r||s must be 64 bytes", resign(t, iss.TokenWith(t, map[string]any{"alg": "ES256"}, claims()),
			func(s []byte) []byte { return s[1:] }), ErrInvalidToken, "63 bytes, want 64"},
		{"alg none", "unsigned tokens refused", forge(t, good, map[string]any{"alg": "none", "kid": iss.KeyID()},
			func([]byte) []byte { return nil }), ErrInvalidToken, `algorithm "none" not allowed`},
		{"hs256 confusion", "HMAC keyed with the RSA public key PEM", forge(t, good, map[string]any{"alg": "HS256", "kid": iss.KeyID()},
			func(in []byte) []byte { m := hmac.New(sha256.New, pubPEM); m.Write(in); return m.Sum(nil) }), ErrInvalidToken, `algorithm "HS256" not allowed`},
		{"unknown kid", "signed by another issuer's key", other.Token(t, claims("iss", iss.URL())), ErrInvalidToken, `no RS256 key with kid`},
		{"kid of wrong type", "ES256 header naming the RSA key", iss.TokenWith(t, map[string]any{"alg": "ES256", "kid": iss.KeyID()}, claims()), ErrInvalidToken, `no ES256 key with kid`},
		{"crit", "crit extensions unsupported", iss.TokenWith(t, map[string]any{"crit": []string{"exp"}}, claims()), ErrInvalidToken, "crit"},
		{"typ JWE", "not a JWT", iss.TokenWith(t, map[string]any{"typ": "JWE"}, claims()), ErrInvalidToken, `typ "JWE"`},
		{"two parts", "compact JWS has 3 parts", good[:strings.LastIndexByte(good, '.')], ErrInvalidToken, "2 dot-separated parts"},
		{"padding", "base64url without padding", good + "==", ErrInvalidToken, "part 3"},
		{"newline", "the decoder would skip it", good[:5] + "\n" + good[5:], ErrInvalidToken, "part 1"},
		{"huge", "16 KiB at most", good + strings.Repeat("A", 16<<10), ErrInvalidToken, "more than 16384"},
	}
	for _, alg := range []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"} {
		cases = append(cases, tc{"valid " + alg, "supported algorithm", iss.TokenWith(t, map[string]any{"alg": alg}, claims()), nil, ""})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := v.Verify(context.Background(), c.token)
			t.Logf("%s: %v", c.why, err)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("%s: %v", c.why, err)
				}
				if got.Subject() != "alice" {
					t.Errorf("sub = %q", got.Subject())
				}
				return
			}
			if !errors.Is(err, c.wantErr) || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Fatalf("%s: got %v, want %v containing %q", c.why, err, c.wantErr, c.msg)
			}
			if len(c.token) > 100 && strings.Contains(err.Error(), c.token) {
				t.Errorf("error echoes the token")
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		issuer, audience string
		ok               bool
		why              string
	}{
		{"https://login.example.com/realms/x", aud, true, "https issuer"},
		{"https://login.example.com/", aud, true, "trailing slash kept"},
		{"http://127.0.0.1:8080", aud, true, "http on IPv4 loopback"},
		{"http://[::1]:8080", aud, true, "http on IPv6 loopback"},
		{"http://localhost", aud, true, "http on localhost"},
		{"http://login.example.com", aud, false, "http off loopback"},
		{"http://127.0.0.1.example.com", aud, false, "not loopback, just looks like it"},
		{"login.example.com", aud, false, "not absolute"},
		{"", aud, false, "no issuer"},
		{"https://login.example.com?x=1", aud, false, "query"},
		{"https://login.example.com", "", false, "no audience"},
	} {
		_, err := New(Config{Issuer: c.issuer, Audience: c.audience})
		if (err == nil) != c.ok {
			t.Errorf("New(%q, %q) = %v; %s", c.issuer, c.audience, err, c.why)
		}
	}
}

// openWindow lets the next unknown kid refetch the JWKS, as if 30 s passed.
func openWindow(v *Verifier) {
	v.mu.Lock()
	v.lastFetch = time.Time{}
	v.mu.Unlock()
}

func TestRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss, other := oidctest.NewIssuer(t), oidctest.NewIssuer(t)
	v := newVerifier(t, iss.URL())
	wantFetches := func(n int) {
		t.Helper()
		if got := iss.JWKSFetches(); got != n {
			t.Fatalf("%d JWKS fetches, want %d", got, n)
		}
	}
	old := iss.Token(t, claims())
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	wantFetches(1)

	iss.Rotate(t)
	rotated := iss.Token(t, claims())
	if _, err := v.Verify(ctx, rotated); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("new kid within the refetch window: %v", err)
	}
	wantFetches(1)
	openWindow(v)
	if _, err := v.Verify(ctx, rotated); err != nil {
		t.Fatalf("new kid after the window: %v", err)
	}
	wantFetches(2)
	if _, err := v.Verify(ctx, old); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("retired key: %v", err)
	}
	wantFetches(2)

	// A burst of unknown kids costs one fetch, then none within the window.
	openWindow(v)
	stranger := other.Token(t, claims("iss", iss.URL()))
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if _, err := v.Verify(ctx, stranger); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("unknown kid: %v", err)
			}
		})
	}
	wg.Wait()
	if _, err := v.Verify(ctx, stranger); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("unknown kid: %v", err)
	}
	wantFetches(3)
	if _, err := v.Verify(ctx, rotated); err != nil {
		t.Fatalf("current key after the burst: %v", err)
	}
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	// Same discovery URL, but the document names the issuer without the slash.
	v := newVerifier(t, iss.URL()+"/")
	_, err := v.Verify(context.Background(), iss.Token(t, claims("iss", iss.URL()+"/")))
	if !errors.Is(err, ErrIssuerUnavailable) || !strings.Contains(err.Error(), "discovery document names issuer") {
		t.Fatalf("got %v, want ErrIssuerUnavailable about the issuer", err)
	}
	if n := iss.JWKSFetches(); n != 0 {
		t.Errorf("JWKS fetched %d times from a mismatched issuer", n)
	}
}

func TestRedirectDowngrade(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.RedirectHandler("http://login.example.com/", http.StatusFound))
	t.Cleanup(srv.Close)
	_, err := newVerifier(t, srv.URL).Verify(context.Background(), oidctest.NewIssuer(t).Token(t, claims()))
	if !errors.Is(err, ErrIssuerUnavailable) || !strings.Contains(err.Error(), "not an https URL") {
		t.Fatalf("got %v, want the redirect to plain http refused", err)
	}
}

func TestIssuerDown(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	iss.SetDown(true)
	v := newVerifier(t, iss.URL())
	tok := iss.Token(t, claims())
	for range 2 { // retried, not remembered
		if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrIssuerUnavailable) || errors.Is(err, ErrInvalidToken) {
			t.Fatalf("issuer down: %v", err)
		}
	}
	iss.SetDown(false)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("issuer up again: %v", err)
	}
	// Down again, the cached keys still verify.
	iss.SetDown(true)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("cached keys: %v", err)
	}
}

func TestClaims(t *testing.T) {
	t.Parallel()
	var c Claims
	if err := json.Unmarshal([]byte(`{"sub":"alice","groups":["a","b"],"mixed":["a",1],"n":3,
		"realm_access":{"roles":["admin"]},"https://x.example/role":"ops","scope":"read write"}`), &c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want []string
		why  string
	}{
		{"groups", []string{"a", "b"}, "array of strings"},
		{"sub", []string{"alice"}, "string as one element"},
		{"realm_access.roles", []string{"admin"}, "dotted path"},
		{"https://x.example/role", []string{"ops"}, "claim names with dots are claims first"},
		{"mixed", nil, "array with a non-string"},
		{"n", nil, "number"},
		{"realm_access.nope", nil, "absent nested"},
		{"sub.x", nil, "path through a string"},
	} {
		if got := c.Strings(tc.name); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("Strings(%q) = %#v, want %#v (%s)", tc.name, got, tc.want, tc.why)
		}
	}
	if c.Subject() != "alice" || c.String("n") != "" || c.String("absent") != "" || c.String("scope") != "read write" {
		t.Errorf("String accessors: %q %q %q", c.Subject(), c.String("n"), c.String("scope"))
	}
}

// FuzzVerify: arbitrary input never panics and is never accepted (the seeds
// are genuinely signed, but for another audience).
func FuzzVerify(f *testing.F) {
	iss := oidctest.NewIssuer(f)
	v := newVerifier(f, iss.URL())
	c := map[string]any{"aud": "someone-else", "sub": "alice"}
	for _, alg := range []string{"RS256", "PS384", "ES256", "ES512", "EdDSA"} {
		f.Add(iss.TokenWith(f, map[string]any{"alg": alg}, c))
	}
	f.Add(iss.TokenWith(f, map[string]any{"kid": nil, "typ": nil}, c))
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, raw string) {
		claims, err := v.Verify(context.Background(), raw)
		if err == nil {
			t.Fatalf("accepted: %v", claims)
		}
		if !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("not ErrInvalidToken: %v", err)
		}
	})
}

// clock is a settable clock for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestKeysExpire: keys are fetched again when their max-age has passed
// (15 minutes without one), and a key the issuer no longer publishes is
// then refused, though no token named a new key (it used to stay trusted
// for ever). Cache-Control's max-age is honoured within 1 minute and
// 1 hour.
func TestKeysExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss := oidctest.NewIssuer(t)
	clk := &clock{now: time.Now()}
	// The clock runs hours ahead: a long leeway keeps the tokens valid.
	v, err := New(Config{Issuer: iss.URL(), Audience: aud, Now: clk.Now, Leeway: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	wantFetches := func(n int, why string) {
		t.Helper()
		if got := iss.JWKSFetches(); got != n {
			t.Fatalf("%s: %d JWKS fetches, want %d", why, got, n)
		}
	}
	old := iss.Token(t, claims())
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	wantFetches(1, "first token")
	iss.Rotate(t) // the old key is retired: the JWKS no longer has it
	clk.Add(14 * time.Minute)
	if _, err := v.Verify(ctx, old); err != nil {
		t.Fatalf("within the keys' 15 minutes: %v", err)
	}
	wantFetches(1, "within 15 minutes")
	clk.Add(2 * time.Minute)
	if _, err := v.Verify(ctx, old); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a retired key after 16 minutes: %v, want refused", err)
	}
	wantFetches(2, "after 16 minutes")
	current := iss.Token(t, claims())
	if _, err := v.Verify(ctx, current); err != nil {
		t.Fatalf("the current key: %v", err)
	}

	for _, tc := range []struct {
		cacheControl string
		keep         time.Duration // no fetch until then
		why          string
	}{
		{"public, max-age=300", 5 * time.Minute, "max-age honoured"},
		{"max-age=2", time.Minute, "at least a minute"},
		{"no-store", time.Minute, "no-store: as often as allowed"},
		{"max-age=604800", time.Hour, "at most an hour"},
		{"max-age=banana", 15 * time.Minute, "a bad max-age: the default"},
	} {
		iss.SetCacheControl(tc.cacheControl)
		clk.Add(time.Hour + time.Minute) // past any max-age: the next Verify fetches
		n := iss.JWKSFetches()
		if _, err := v.Verify(ctx, current); err != nil {
			t.Fatal(err)
		}
		wantFetches(n+1, tc.why+": the fetch")
		clk.Add(tc.keep - time.Second)
		if _, err := v.Verify(ctx, current); err != nil {
			t.Fatal(err)
		}
		wantFetches(n+1, tc.why+": just before its time")
		clk.Add(2 * time.Second)
		if _, err := v.Verify(ctx, current); err != nil {
			t.Fatal(err)
		}
		wantFetches(n+2, tc.why+": just after its time")
	}
}

// TestStaleKeysWhileIssuerDown: keys past their time stay in use while
// the issuer cannot be reached, at most 24 hours after their last fetch,
// and the issuer is not asked more than every 30 s meanwhile.
func TestStaleKeysWhileIssuerDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	iss := oidctest.NewIssuer(t)
	clk := &clock{now: time.Now()}
	v, err := New(Config{Issuer: iss.URL(), Audience: aud, Now: clk.Now, Leeway: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Token(t, claims())
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	iss.SetDown(true)
	clk.Add(20 * time.Minute)
	for range 3 {
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("stale keys while the issuer is down: %v", err)
		}
	}
	if n := iss.JWKSFetches(); n != 1 {
		t.Errorf("%d successful fetches, want 1", n)
	}
	clk.Add(24 * time.Hour)
	if _, err := v.Verify(ctx, tok); !errors.Is(err, ErrIssuerUnavailable) {
		t.Fatalf("keys fetched more than 24 hours ago: %v, want ErrIssuerUnavailable", err)
	}
	iss.SetDown(false)
	clk.Add(time.Minute)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("the issuer back: %v", err)
	}
}
