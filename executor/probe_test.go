package executor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProbe: /healthz is 200 only when the executor is ready and every
// connection check passes, and says no more than ok or unavailable.
func TestProbe(t *testing.T) {
	t.Parallel()
	pass := func(context.Context) error { return nil }
	fail := func(context.Context) error { return errors.New("dial tcp 10.0.0.1:7233: refused") }
	for _, tc := range []struct {
		name   string
		ready  bool
		checks map[string]func(context.Context) error
		want   int
	}{
		{"starting: the workers do not poll yet", false, map[string]func(context.Context) error{"temporal": pass}, 503},
		{"starting: not even connected", false, nil, 503},
		{"serving and connected", true, map[string]func(context.Context) error{"temporal": pass}, 200},
		{"serving, Temporal lost", true, map[string]func(context.Context) error{"temporal": fail}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &probe{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			p.ready.Store(tc.ready)
			p.setChecks(tc.checks)
			rec := httptest.NewRecorder()
			p.healthz(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d", rec.Code, tc.want)
			}
			if body := rec.Body.String(); strings.Contains(body, "10.0.0.1") {
				t.Errorf("body %s echoes the failure", body)
			}
		})
	}
}
