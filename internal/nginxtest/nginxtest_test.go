package nginxtest

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/alertmanagertest"
)

func do(t *testing.T, method, url, body string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestProxyChecks: nginx passes requests to a real Alertmanager only with
// the right API key and bearer token, and answers 401 otherwise.
func TestProxyChecks(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	s := Start(t, Options{
		Upstream:     strings.TrimSuffix(am.URL, "/api/v2"),
		APIKeyHeader: "X-API-Key", APIKey: "k3y",
		Bearer: "t0ken",
	})
	good := map[string]string{"X-API-Key": "k3y", "Authorization": "Bearer t0ken"}
	for _, c := range []struct {
		reason  string
		headers map[string]string
		want    int
	}{
		{"both right", good, 200},
		{"no API key", map[string]string{"Authorization": "Bearer t0ken"}, 401},
		{"wrong API key", map[string]string{"X-API-Key": "nope", "Authorization": "Bearer t0ken"}, 401},
		{"no bearer", map[string]string{"X-API-Key": "k3y"}, 401},
		{"wrong bearer", map[string]string{"X-API-Key": "k3y", "Authorization": "Bearer nope"}, 401},
	} {
		resp, body := do(t, "GET", s.URL+"/api/v2/silences", "", c.headers)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d\nnginx log:\n%s", c.reason, resp.StatusCode, body, c.want, s.Log())
		}
		if c.want == 200 && strings.TrimSpace(body) != "[]" {
			t.Errorf("%s: body %q, want Alertmanager's empty list", c.reason, body)
		}
	}
	resp, body := do(t, "GET", s.URL+"/api/v2/silences", "", map[string]string{"X-API-Key": "k3y"})
	if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") ||
		body != `{"error":"missing or wrong bearer token"}` {
		t.Errorf("missing bearer: WWW-Authenticate %q, body %q", got, body)
	}
	if _, body := do(t, "GET", s.URL+"/api/v2/silences", "", nil); body != `{"error":"missing or wrong API key"}` &&
		body != `{"error":"missing or wrong bearer token"}` {
		t.Errorf("no credentials: body %q", body)
	}
}

// TestRateLimit: over the rate, nginx answers 429 (or 503, as asked) with
// Retry-After, with or without a burst; after that delay a request passes
// again.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	for _, c := range []struct{ status, burst int }{
		{0, 2},
		{http.StatusServiceUnavailable, 2},
		{0, 0}, // no burst: nginx refuses "burst=0"
	} {
		s := Start(t, Options{Upstream: strings.TrimSuffix(am.URL, "/api/v2"), Rate: "2r/s", Burst: c.burst, RetryAfter: 1, LimitStatus: c.status})
		want := c.status
		if want == 0 {
			want = http.StatusTooManyRequests
		}
		s.Exhaust(t, "/api/v2/status", nil)
		resp, _ := do(t, "GET", s.URL+"/api/v2/status", "", nil)
		if resp.StatusCode != want || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("over the rate: %d Retry-After %q, want %d with 1", resp.StatusCode, resp.Header.Get("Retry-After"), want)
		}
		time.Sleep(time.Second) // the delay the server asked for
		resp, _ = do(t, "GET", s.URL+"/api/v2/status", "", nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Retry-After") != "" {
			t.Fatalf("after Retry-After: %d Retry-After %q, want 200 without", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
}

// TestWebDAV: the share stores a PUT, serves it as JSON, answers 409 where
// nginx does, and deletes.
func TestWebDAV(t *testing.T) {
	t.Parallel()
	s := Start(t, Options{})
	resp, body := do(t, "PUT", s.URL+"/dav/a.json", `{"a":1}`, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d %s\nnginx log:\n%s", resp.StatusCode, body, s.Log())
	}
	if b, err := os.ReadFile(filepath.Join(s.DAVDir, "a.json")); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("stored %q %v", b, err)
	}
	resp, body = do(t, "GET", s.URL+"/dav/a.json", "", nil)
	if resp.StatusCode != 200 || body != `{"a":1}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET = %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
	for _, c := range []struct{ reason, method, path, body string }{
		{"a PUT onto a collection's URL", "PUT", "/dav/c", `{}`},
		{"a MKCOL whose parent collection is missing", "MKCOL", "/dav/missing/sub/", ""},
	} {
		if c.method == "PUT" {
			if resp, _ := do(t, "MKCOL", s.URL+c.path+"/", "", nil); resp.StatusCode != http.StatusCreated {
				t.Fatalf("MKCOL %s/ = %d", c.path, resp.StatusCode)
			}
		}
		if resp, body := do(t, c.method, s.URL+c.path, c.body, nil); resp.StatusCode != http.StatusConflict {
			t.Errorf("%s: %d %s, want 409", c.reason, resp.StatusCode, body)
		}
	}
	// Not 409 but 500: nginx's rename into the missing directory fails.
	if resp, _ := do(t, "PUT", s.URL+"/dav/missing/b.json", `{}`, nil); resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("a PUT whose parent collection is missing: %d, want nginx's 500", resp.StatusCode)
	}
	if resp, _ = do(t, "DELETE", s.URL+"/dav/a.json", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	if resp, _ = do(t, "GET", s.URL+"/dav/a.json", "", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET after DELETE = %d", resp.StatusCode)
	}
}

// TestStopsAndCleans: the server's processes end and its directory goes
// when the test ends.
func TestStopsAndCleans(t *testing.T) {
	var s *Server
	t.Run("inner", func(t *testing.T) { s = Start(t, Options{}) })
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", s.Dir, err)
	}
	if _, err := (&http.Client{Timeout: time.Second}).Get(s.URL + "/dav/"); err == nil {
		t.Errorf("nginx still answers on %s", s.URL)
	}
}

// TestMissingNginx: without the binary, the error says what to install.
func TestMissingNginx(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findAt("/nonexistent/nginx")
	if err == nil || !strings.Contains(err.Error(), "apt-get install nginx-light") {
		t.Errorf("error %v, want one naming the package to install", err)
	}
}
