package rest_test

// The rest:: adapter against a real Prometheus Alertmanager 0.25
// (internal/alertmanagertest), its v2 silences API: the server assigns a
// silence's id, so the object is found by a search on its comment and its
// URL is /silence/{id}; an update is a POST of the silence with its id
// (Alertmanager replaces a silence whose matchers change: a new id, the old
// one expired); a delete expires it, and an expired silence counts as
// absent. Its errors are text (a JSON string).

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters"
	"github.com/intendhq/intend/adapters/conformance"
	"github.com/intendhq/intend/adapters/rest"
	"github.com/intendhq/intend/internal/alertmanagertest"
)

// silence returns the attributes of a silence of alertname=alert made by
// createdBy, identified by its comment "intend:<name>". It is pending
// (it starts in 2030), so that Alertmanager updates it in place when its
// matchers stay; startsAt and endsAt are not managed, since Alertmanager
// answers them in its own format.
func silence(endpoint, name, alert, createdBy string) map[string]any {
	return map[string]any{
		"endpoint": endpoint,
		"search": map[string]any{
			"path":    "/silences",
			"match":   map[string]any{"/comment": "intend:" + name},
			"exclude": map[string]any{"/status/state": []any{"expired"}},
			"id":      "/id", "item": "/silence/{id}", "id_from": "/silenceID",
		},
		"collection": "/silences",
		"update":     map[string]any{"method": "POST", "path": "/silences", "id_field": "/id"},
		"body": map[string]any{
			"matchers":  []any{map[string]any{"name": "alertname", "value": alert, "isRegex": false, "isEqual": true}},
			"startsAt":  "2030-01-01T00:00:00Z",
			"endsAt":    "2030-01-02T00:00:00Z",
			"createdBy": createdBy,
			"comment":   "intend:" + name,
		},
		"managed": []any{"/matchers", "/createdBy", "/comment"},
		"facts":   map[string]any{"silence_id": "/id"},
	}
}

// liveSilence returns the one live silence with the comment of name.
func liveSilence(t *testing.T, am *alertmanagertest.Server, name string) alertmanagertest.Silence {
	t.Helper()
	live := am.Live(t, "intend:"+name)
	if len(live) != 1 {
		t.Fatalf("%d live silences for %s, want 1: %+v", len(live), name, live)
	}
	return live[0]
}

// TestAlertmanagerSilenceLifecycle: a silence is created (its id, from
// the server, published as a fact), found again by the search with no
// drift from what the server adds, repaired after someone changed it,
// updated in place by a POST with its id, replaced when its matchers
// change, and deleted by expiring it, after which it counts as absent.
func TestAlertmanagerSilenceLifecycle(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	desired := srvObject("disk", silence(am.URL, "disk", "DiskFull", "intend"), false)

	srvApply(t, desired, true, adapters.OpCreate)
	if n := len(am.Silences(t)); n != 0 {
		t.Fatalf("the dry-run created %d silences", n)
	}
	_, hc := srvApply(t, desired, false, adapters.OpCreate)
	first := liveSilence(t, am, "disk")
	if first.Status.State != "pending" || first.CreatedBy != "intend" {
		t.Fatalf("created %+v", first)
	}
	if id := hc.Facts()["silence_id"]; id != first.ID {
		t.Errorf("silence_id fact %v, want the server's id %s", id, first.ID)
	}
	_, hc = srvApply(t, desired, false, adapters.OpNone)
	if id := hc.Facts()["silence_id"]; id != first.ID {
		t.Errorf("silence_id fact %v after a no-op, want %s", id, first.ID)
	}

	// Someone edits the silence: the dry-run names the field, the apply
	// puts it back, in place.
	code, raw := am.Do(t, http.MethodPost, "/silences", map[string]any{
		"id": first.ID, "matchers": first.Matchers, "startsAt": "2030-01-01T00:00:00Z", "endsAt": "2030-01-02T00:00:00Z",
		"createdBy": "someone", "comment": first.Comment,
	})
	if code != http.StatusOK {
		t.Fatalf("edit: %d %s", code, raw)
	}
	_, hc = srvApply(t, desired, true, adapters.OpUpdate)
	if !srvFieldLogged(hc, "/createdBy") || srvFieldLogged(hc, "/matchers") {
		t.Errorf("the dry-run of the drift logs %s, want /createdBy (alone) as differing", srvJSON(hc.Logs()))
	}
	srvApply(t, desired, false, adapters.OpUpdate)
	if got := liveSilence(t, am, "disk"); got.CreatedBy != "intend" || got.ID != first.ID {
		t.Fatalf("after the repair: %+v, want createdBy intend and id %s", got, first.ID)
	}

	// An update Alertmanager makes in place keeps the id.
	updated := srvObject("disk", silence(am.URL, "disk", "DiskFull", "intend-team"), false)
	srvApply(t, updated, false, adapters.OpUpdate)
	if got := liveSilence(t, am, "disk"); got.CreatedBy != "intend-team" || got.ID != first.ID {
		t.Fatalf("after the update: %+v, want createdBy intend-team and id %s", got, first.ID)
	}
	srvApply(t, updated, false, adapters.OpNone)

	// New matchers: Alertmanager expires the silence and makes another;
	// the search finds the new one, and the fact follows.
	replaced := srvObject("disk", silence(am.URL, "disk", "DiskAlmostFull", "intend-team"), false)
	srvApply(t, replaced, false, adapters.OpUpdate)
	second := liveSilence(t, am, "disk")
	if second.ID == first.ID || second.Matchers[0].Value != "DiskAlmostFull" {
		t.Fatalf("after new matchers: %+v, want a new silence of DiskAlmostFull", second)
	}
	_, hc = srvApply(t, replaced, false, adapters.OpNone)
	if id := hc.Facts()["silence_id"]; id != second.ID {
		t.Errorf("silence_id fact %v after the replacement, want %s", id, second.ID)
	}

	gone := srvObject("disk", silence(am.URL, "disk", "DiskAlmostFull", "intend-team"), true)
	srvApply(t, gone, true, adapters.OpDelete)
	liveSilence(t, am, "disk")
	srvApply(t, gone, false, adapters.OpDelete)
	if live := am.Live(t, "intend:disk"); len(live) != 0 {
		t.Fatalf("live silences after the delete: %+v", live)
	}
	// Alertmanager still lists both, expired: they count as absent.
	if all := am.Silences(t); len(all) != 2 || all[0].Status.State != "expired" || all[1].Status.State != "expired" {
		t.Fatalf("silences after the delete: %+v, want two expired", all)
	}
	srvApply(t, gone, false, adapters.OpNone)
	// And a new desired silence of the same name is created anew.
	srvApply(t, desired, false, adapters.OpCreate)
	if got := liveSilence(t, am, "disk"); got.ID == first.ID || got.ID == second.ID {
		t.Fatalf("the re-created silence has an old id: %+v", got)
	}
}

// TestAlertmanagerConformance runs the adapter conformance suite on a
// silence; its retries of Create must find the silence rather than make a
// second one.
func TestAlertmanagerConformance(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	noItem := silence(am.URL, "conf", "Conf", "intend")
	noItem["search"].(map[string]any)["item"] = "/silence/" // no {id}
	conformance.Run(t, conformance.Case{
		Handler: rest.Object{},
		Desired: srvObject("conf", silence(am.URL, "conf", "Conf", "intend"), false),
		Updated: srvObject("conf", silence(am.URL, "conf", "Conf", "intend-team"), false),
		Invalid: map[string]adapters.Resource{"search.item": srvObject("conf", noItem, false)},
		Exists:  func(t testing.TB) bool { return len(am.Live(t, "intend:conf")) > 0 },
	})
	if n := len(am.Silences(t)); n > 2 {
		t.Errorf("%d silences after the suite, want at most the one created and its replacement", n)
	}
}

// TestAlertmanagerTextError: Alertmanager's text error (a silence that
// ends before it starts) is a permanent error quoting it, and nothing is
// created.
func TestAlertmanagerTextError(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	a := silence(am.URL, "backwards", "X", "intend")
	a["body"].(map[string]any)["endsAt"] = "2029-12-31T00:00:00Z"
	_, err := srvFail(t, srvObject("backwards", a, false), false, adapters.ClassPermanent)
	if !strings.Contains(err.Error(), "start time must be before end time") || !strings.Contains(err.Error(), "400") {
		t.Errorf("error %q does not quote Alertmanager's status and text", err)
	}
	if n := len(am.Silences(t)); n != 0 {
		t.Errorf("the refused silence created %d", n)
	}
}

// TestAlertmanagerActiveSilenceReplaced: an active silence (started in
// the past) cannot be changed in place by Alertmanager, even its author:
// the update replaces it, and exactly one live silence remains.
func TestAlertmanagerActiveSilenceReplaced(t *testing.T) {
	t.Parallel()
	am := alertmanagertest.Start(t)
	active := func(createdBy string) adapters.Resource {
		a := silence(am.URL, "cpu", "CPUHigh", createdBy)
		b := a["body"].(map[string]any)
		b["startsAt"] = time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
		b["endsAt"] = time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
		return srvObject("cpu", a, false)
	}
	srvApply(t, active("intend"), false, adapters.OpCreate)
	first := liveSilence(t, am, "cpu")
	if first.Status.State != "active" {
		t.Fatalf("created %+v, want active", first)
	}
	srvApply(t, active("intend-team"), false, adapters.OpUpdate)
	if got := liveSilence(t, am, "cpu"); got.CreatedBy != "intend-team" {
		t.Fatalf("after the update: %+v", got)
	}
	srvApply(t, active("intend-team"), false, adapters.OpNone)
}
