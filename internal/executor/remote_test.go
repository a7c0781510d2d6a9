package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/internal/ledger"
)

// TestRemoteSplitsLargeChunks: a chunk larger than one POST goes in
// parts, in order, each a whole JSON body with the again flag, split the
// same way when sent again.
func TestRemoteSplitsLargeChunks(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posts [][]string
	var agains []bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" ||
			r.URL.EscapedPath() != "/base/api/v1/environments/e%201/executor/batches/7/2/actions" {
			http.Error(w, "wrong request "+r.URL.EscapedPath(), 400)
			return
		}
		var body struct {
			Records []ledger.ActionRecord `json:"records"`
			Again   bool                  `json:"again"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var ids []string
		for _, rec := range body.Records {
			ids = append(ids, rec.ResourceID)
		}
		mu.Lock()
		posts, agains = append(posts, ids), append(agains, body.Again)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	r, err := NewRemote(srv.URL+"/base/", "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.maxPost = 700
	var recs []ledger.ActionRecord
	for i := range 10 {
		recs = append(recs, ledger.ActionRecord{ResourceID: fmt.Sprintf("x::Y[a,n=%d]", i), Result: "deployed",
			Logs: json.RawMessage(`["` + strings.Repeat("l", 100) + `"]`)})
	}
	for _, again := range []bool{false, true} {
		posts, agains = nil, nil
		if err := r.RecordActions(context.Background(), "e 1", 7, 2, recs, again); err != nil {
			t.Fatal(err)
		}
		var all []string
		for i, p := range posts {
			if len(p) == 0 || agains[i] != again {
				t.Errorf("post %d = %v (again %v), want records and again %v", i, p, agains[i], again)
			}
			all = append(all, p...)
		}
		if len(posts) < 3 || len(all) != 10 || all[0] != "x::Y[a,n=0]" || all[9] != "x::Y[a,n=9]" {
			t.Errorf("again=%v: %d posts %v, want 10 records in order over several posts", again, len(posts), posts)
		}
	}
	// One record larger than the bound still goes, alone.
	posts = nil
	big := []ledger.ActionRecord{{ResourceID: "x::Y[a,n=big]", Logs: json.RawMessage(`["` + strings.Repeat("l", 2000) + `"]`)}}
	if err := r.RecordActions(context.Background(), "e 1", 7, 2, big, false); err != nil || len(posts) != 1 {
		t.Errorf("a record above the bound: %v, %d posts", err, len(posts))
	}
}

// TestRemoteErrors: what an executor does with each answer depends on
// the error's kind: unavailable (wait, try again), not found (give up),
// or a refusal, shown with the problem's detail and fields.
func TestRemoteErrors(t *testing.T) {
	t.Parallel()
	codes := map[string]int{"/unavailable": 503, "/busy": 429, "/gone": 404, "/refused": 422}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, code := range codes {
			if strings.Contains(r.URL.Path, k) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(code)
				_, _ = w.Write([]byte(`{"type":"t","title":"T","status":` + fmt.Sprint(code) +
					`,"detail":"what went wrong","errors":[{"field":"/records/0/result","detail":"want one of deployed"}]}`))
				return
			}
		}
	}))
	r, err := NewRemote(srv.URL, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env  string
		want error
	}{{"unavailable", ledger.ErrUnavailable}, {"busy", ledger.ErrUnavailable}, {"gone", ledger.ErrNotFound}, {"refused", nil}} {
		_, err := r.LoadBatch(context.Background(), c.env, 1, 1, "")
		if err == nil || !strings.Contains(err.Error(), "what went wrong") {
			t.Errorf("%s: %v, want the problem's detail", c.env, err)
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.env, err, c.want)
		}
		if c.want == nil && (errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrNotFound) ||
			!strings.Contains(err.Error(), "/records/0/result: want one of deployed")) {
			t.Errorf("%s: %v, want a refusal naming the field", c.env, err)
		}
	}
	srv.Close()
	if _, err := r.LoadBatch(context.Background(), "e", 1, 1, ""); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("a server that is gone: %v, want unavailable", err)
	}
	for _, bad := range []string{"ftp://x", "http://", "https://user:pw@host"} {
		if _, err := NewRemote(bad, "tok", nil); err == nil || strings.Contains(err.Error(), "pw") {
			t.Errorf("NewRemote(%q) = %v, want an error without the password", bad, err)
		}
	}
	if _, err := NewRemote("http://host", "", nil); err == nil || !strings.Contains(err.Error(), "intend token create") {
		t.Errorf("no token: %v", err)
	}
}

// TestRemoteIntentsOfAnOlderServer: a server of before intents answers
// their route 404 (a rolling upgrade); the executor goes on without them
// rather than failing every change. Other errors still stop the change.
func TestRemoteIntentsOfAnOlderServer(t *testing.T) {
	status := http.StatusNotFound
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Not Found","detail":"no route for POST ` + r.URL.Path + `"}`))
	}))
	defer srv.Close()
	r, err := NewRemote(srv.URL, "intend_x", nil)
	if err != nil {
		t.Fatal(err)
	}
	intents := []ledger.Intent{{}}
	if err := r.RecordIntents(context.Background(), "env", 1, 1, intents); err != nil {
		t.Errorf("an older server's 404: %v, want the change to go on", err)
	}
	status = http.StatusForbidden
	if err := r.RecordIntents(context.Background(), "env", 1, 1, intents); err == nil {
		t.Error("a 403: nil, want the error")
	}
}
