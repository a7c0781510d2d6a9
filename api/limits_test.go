package api_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
)

// TestConcurrencyLimits: an environment runs at most store.MaxActiveDryruns
// dry-runs at once, and a server takes at most MaxBulkPerEnvironment
// exports of one environment at once; beyond, 429 with Retry-After, and
// nothing is recorded.
func TestConcurrencyLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{MaxBulkPerEnvironment: 1})
	f.env("busy")
	f.env("calm")
	f.mustCall("PUT", "/api/v1/environments/busy/versions", version(fileRes("/a")), 201)
	f.mustCall("POST", "/api/v1/environments/busy/versions/1/release", "", 200)
	// No dry-run workflow runs in this fixture, so each stays pending.
	for i := 0; i < store.MaxActiveDryruns; i++ {
		f.mustCall("POST", "/api/v1/environments/busy/dryrun", "{}", 202)
	}
	code, out := f.call("POST", "/api/v1/environments/busy/dryrun", "{}")
	if code != 429 || out["type"] != api.TypeTooManyRequests || !strings.Contains(fmt.Sprint(out["detail"]), "dry-runs") {
		t.Errorf("dry-run %d = %d %v, want 429", store.MaxActiveDryruns+1, code, out)
	}
	runs := f.mustCall("GET", "/api/v1/environments/busy/runs", "", 200)
	if n := len(runs["items"].([]any)); n != store.MaxActiveDryruns {
		t.Errorf("%d runs recorded, want %d: the refused one left none", n, store.MaxActiveDryruns)
	}

	// An export whose body is still arriving holds the environment's one
	// slot: a second export of it is refused, another environment's is not.
	// Which of the two reaches the guard first is a race: when the quick
	// one wins, the slow one is the refused one, so start over.
	u, _ := url.Parse(f.srv.URL)
	export := func() *http.Response {
		req, _ := http.NewRequest("PUT", f.srv.URL+"/api/v1/environments/busy/versions", strings.NewReader(version(fileRes("/b"))))
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	deadline := time.Now().Add(20 * time.Second)
	refused := false
	for !refused {
		if time.Now().After(deadline) {
			t.Fatal("a second concurrent export was never refused with 429")
		}
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT /api/v1/environments/busy/versions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", u.Host, f.token)
		for i := 0; i < 50; i++ {
			resp := export()
			if resp.StatusCode == 429 {
				if resp.Header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
				refused = true
				break
			}
			// Did the slow one lose the race (answered, or hung up)?
			_ = conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if n, err := conn.Read(make([]byte, 1)); n > 0 || errors.Is(err, io.EOF) {
				break
			}
		}
		conn.Close()
	}
	f.mustCall("PUT", "/api/v1/environments/calm/versions", version(fileRes("/c")), 201)
}
