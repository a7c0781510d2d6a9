package alertmanagertest

import (
	"net/http"
	"strings"
	"testing"
)

// TestSilences: a silence created through the v2 API is listed active,
// expiring it (DELETE) leaves it listed as expired, a bad silence is
// refused with a text error (a JSON string), and the instance does not gossip.
func TestSilences(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if got := s.Silences(t); len(got) != 0 {
		t.Fatalf("a fresh server has silences: %+v", got)
	}
	id := s.CreateSilence(t, "Disk", "intend:test")
	live := s.Live(t, "intend:test")
	if len(live) != 1 || live[0].ID != id || live[0].Status.State != "active" {
		t.Fatalf("live silences = %+v, want %s active", live, id)
	}
	if code, raw := s.Do(t, http.MethodDelete, "/silence/"+id, nil); code != http.StatusOK {
		t.Fatalf("DELETE = %d %s", code, raw)
	}
	if live := s.Live(t, "intend:test"); len(live) != 0 {
		t.Fatalf("an expired silence is live: %+v", live)
	}
	all := s.Silences(t)
	if len(all) != 1 || all[0].Status.State != "expired" {
		t.Fatalf("silences after expiry = %+v, want it listed expired", all)
	}
	code, raw := s.Do(t, http.MethodPost, "/silences", map[string]any{
		"matchers": []Matcher{{Name: "alertname", Value: "x", IsEqual: true}},
		"startsAt": "2030-01-02T00:00:00Z", "endsAt": "2030-01-01T00:00:00Z",
		"createdBy": "t", "comment": "ends before it starts",
	})
	if code != http.StatusBadRequest || !strings.Contains(string(raw), "start time must be before end time") {
		t.Fatalf("a silence ending before it starts = %d %q, want 400 with its text error", code, raw)
	}
	code, status := s.Do(t, http.MethodGet, "/status", nil)
	if code != http.StatusOK || !strings.Contains(string(status), `"cluster":{"peers":[],"status":"disabled"}`) {
		t.Errorf("status = %d %s, want the cluster disabled", code, status)
	}
}

// TestMissingAlertmanager: without the binary, the error says what to install.
func TestMissingAlertmanager(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := findAt("/nonexistent/alertmanager")
	if err == nil || !strings.Contains(err.Error(), "apt-get install prometheus-alertmanager") {
		t.Errorf("error %v, want one naming the package to install", err)
	}
}
