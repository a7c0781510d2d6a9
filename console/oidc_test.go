package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/oidc/oidctest"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
)

// TestOIDCSignInRefusesBadAnswers: the callback refuses what did not
// come from a sign-in this browser started, and says why; a good answer
// whose token the API refuses signs nobody in.
func TestOIDCSignInRefusesBadAnswers(t *testing.T) {
	iss := oidctest.NewIssuer(t)
	iss.SetLogin(map[string]any{"sub": "alice"})
	c, err := New(Options{API: &fakeAPI{}, OIDC: &OIDCLogin{Issuer: iss.URL(), ClientID: "intend-console"}})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	// start begins a sign-in and returns its cookie and state.
	start := func(next string) (*http.Cookie, string, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/console/oidc/login?next="+url.QueryEscape(next), nil))
		loc, _ := url.Parse(w.Header().Get("Location"))
		cks := w.Result().Cookies()
		if w.Code != http.StatusFound || len(cks) != 1 || !strings.HasPrefix(loc.String(), iss.URL()+"/authorize?") {
			t.Fatalf("start = %d %q %v", w.Code, loc, cks)
		}
		q := loc.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("nonce") == "" || q.Get("redirect_uri") != "http://example.com/console/oidc/callback" ||
			cks[0].SameSite != http.SameSiteLaxMode || !cks[0].HttpOnly {
			t.Fatalf("authorization request %v, cookie %+v", q, cks[0])
		}
		return cks[0], q.Get("state"), loc.String()
	}
	callback := func(ck *http.Cookie, query string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/console/oidc/callback?"+query, nil)
		if ck != nil {
			r.AddCookie(ck)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	ck, state, _ := start("//evil.example/")
	f, ok := c.openFlow(ck.Value)
	if !ok || f.Next != "/console/" {
		t.Errorf("a sign-in asked to go to another site goes to %q", f.Next)
	}
	tampered := *ck
	tampered.Value = strings.Replace(ck.Value, ".", "x.", 1)
	expired := *ck
	expired.Value = c.sealFlow(oidcFlow{State: state, Nonce: "n", Verifier: "v", Next: "/console/", Expires: time.Now().Add(-time.Minute).Unix()})
	for _, tc := range []struct {
		why    string
		ck     *http.Cookie
		query  string
		status int
		want   string
		fresh  bool // a sign-in of its own: the case takes its state
	}{
		{"no sign-in started", nil, "code=x&state=" + state, 400, "not started here", false},
		{"a tampered cookie", &tampered, "code=x&state=" + state, 400, "not started here", false},
		{"an expired sign-in", &expired, "code=x&state=" + state, 400, "longer than 10 minutes", false},
		{"another sign-in's state", ck, "code=x&state=other", 400, "not for this sign-in", false},
		{"the issuer's refusal", nil, "error=access_denied&error_description=no", 401, "access_denied", true},
		{"no code", nil, "", 400, "no code", true},
		{"a code the issuer never gave", nil, "code=forged", 502, "did not give a token", true},
	} {
		if tc.fresh {
			var st string
			tc.ck, st, _ = start("/console/")
			tc.query += "&state=" + st
		}
		w := callback(tc.ck, tc.query)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d, want %d with %q:\n%.300s", tc.why, w.Code, tc.status, tc.want, w.Body.String())
		}
		for _, set := range w.Result().Cookies() {
			if set.Name == cookieName && set.Value != "" {
				t.Errorf("%s signed someone in", tc.why)
			}
		}
	}
	// A real answer from the issuer, whose token the API refuses (the fake
	// API knows only "good"): nobody is signed in.
	ck, _, authorize := start("/console/")
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := url.Parse(resp.Header.Get("Location"))
	w := callback(ck, back.RawQuery)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "does not accept this identity") {
		t.Errorf("a token the API refuses: %d %.300s", w.Code, w.Body.String())
	}
	// Without an issuer configured there is no OIDC sign-in.
	plain, _ := New(Options{API: &fakeAPI{}})
	w = httptest.NewRecorder()
	plain.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/console/oidc/login", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("OIDC sign-in without an issuer: %d", w.Code)
	}
}

// TestOIDCStateIsTakenOnce: a sign-in's callback is taken once, on
// whichever server replica it lands (the replicas share the key and the
// used states in PostgreSQL). Replaying the issuer's answer with the
// flow's cookie used to be refused only by the issuer's one-time code,
// after the console had sent it on again.
func TestOIDCStateIsTakenOnce(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	key, err := st.ConsoleKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := st.ConsoleKey(ctx); err != nil || string(again) != string(key) || len(key) != 32 {
		t.Fatalf("the console key changes between calls: %v", err)
	}
	iss := oidctest.NewIssuer(t)
	iss.SetLogin(map[string]any{"sub": "alice"})
	// The API accepts any bearer: what is checked here is the console.
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"oidc","name":"alice","actor":"oidc:alice","role":"read","environments":{}}`)
	})
	replica := func() http.Handler {
		c, err := New(Options{API: api, OIDC: &OIDCLogin{Issuer: iss.URL(), ClientID: "intend-console"}, Key: key, States: st})
		if err != nil {
			t.Fatal(err)
		}
		return c.Handler()
	}
	a, b := replica(), replica()
	serve := func(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	// Begin on replica a, come back from the issuer to replica b.
	w := serve(a, httptest.NewRequest("GET", "/console/oidc/login", nil))
	flow := w.Result().Cookies()
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).
		Get(w.Header().Get("Location"))
	if err != nil || len(flow) != 1 {
		t.Fatalf("start: %v %v", err, flow)
	}
	resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))
	callback := func(h http.Handler) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/console/oidc/callback?"+back.RawQuery, nil)
		r.AddCookie(flow[0])
		return serve(h, r)
	}
	w = callback(b)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("the callback on another replica: %d %.300s", w.Code, w.Body.String())
	}
	for name, h := range map[string]http.Handler{"the same replica": b, "the first replica": a} {
		w := callback(h)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "completed already") {
			t.Errorf("a replay on %s: %d, want 400 (completed already):\n%.300s", name, w.Code, w.Body.String())
		}
		for _, set := range w.Result().Cookies() {
			if set.Name == cookieName && set.Value != "" {
				t.Errorf("a replay on %s signed someone in", name)
			}
		}
	}
}
