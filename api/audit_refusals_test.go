package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/api/apitest"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/store"
)

// TestRefusalsDoNotFloodTheAuditTrail: every refusal was an audit row, so
// a read token wrote 1,000 rows in 33 s. Now 1,000 refused requests (two
// kinds, through two replicas sharing the database) write one row per
// kind and window, and summary rows that count the rest: every refusal
// is accounted for, in a bounded number of rows.
func TestRefusalsDoNotFloodTheAuditTrail(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	f := newFixture(t, api.Options{AuditRefusalWindow: window})
	f.env("prod")
	reader := f.newToken("reader", "read", nil)
	// A second replica: its own API server on the same database.
	replica := httptest.NewServer(apitest.Validating(t, api.New(api.Options{Store: f.st, Auth: &auth.Authenticator{Tokens: f.st},
		AuditRefusalWindow: window, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler()))
	t.Cleanup(replica.Close)

	const n = 1000
	kinds := []struct{ method, path, action string }{
		{"POST", "/api/v1/projects", "project.create"},                 // a global admin's route: 403
		{"POST", "/api/v1/environments/prod/deploy", "deploy.request"}, // an operator's: 403 in prod
	}
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				k, base := kinds[i%2], f.srv.URL
				if i/2%2 == 1 {
					base = replica.URL
				}
				req, _ := http.NewRequest(k.method, base+k.path, nil)
				req.Header.Set("Authorization", "Bearer "+reader)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("%s %s: %d, want 403", k.method, k.path, resp.StatusCode)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)

	// The windows that are still open are summed up once they close.
	time.Sleep(window)
	if _, err := f.st.FlushAuditRefusals(context.Background(), window); err != nil {
		t.Fatal(err)
	}
	rows, err := f.st.ListAudit(context.Background(), store.AuditFilter{Actor: "token:reader", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// At most a row and a summary per kind and window begun.
	windows := int(elapsed/window) + 1
	if max := 2 * len(kinds) * windows; len(rows) > max {
		t.Errorf("%d refusals in %s wrote %d audit rows, want at most %d", n, elapsed, len(rows), max)
	}
	counted := map[string]int{}
	summaries := 0
	for _, r := range rows {
		if r.Status != http.StatusForbidden {
			t.Errorf("row %+v: status %d", r, r.Status)
		}
		var d struct {
			Summary  string `json:"summary"`
			Refusals int    `json:"refusals"`
		}
		if len(r.Detail) > 0 {
			if err := json.Unmarshal(r.Detail, &d); err != nil || d.Refusals < 1 || d.Summary == "" {
				t.Errorf("summary row %s: want its count and text", r.Detail)
			}
			counted[r.Action] += d.Refusals
			summaries++
			continue
		}
		counted[r.Action]++
	}
	for _, k := range kinds {
		if counted[k.action] != n/2 {
			t.Errorf("%s: %d refusals accounted for in the trail, want %d", k.action, counted[k.action], n/2)
		}
	}
	if summaries == 0 {
		t.Error("no summary row")
	}
	t.Logf("%d refusals in %s: %d audit rows, %d of them summaries", n, elapsed.Round(time.Millisecond), len(rows), summaries)
}
