package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// fakeRollbackLSM is fakeLSM with vm web up at version 5 (a state that
// takes an update), a log of five versions (version 1 holding no set),
// and the rollback: refused with the API's 409 when the form's version
// is not 5, and its 422 for version 2 (nothing to restore there); a
// reader's writes get the API's 403.
type fakeRollbackLSM struct{ fakeLSM }

const rollbackLog = `{"items":[
 {"version":5,"state":"up","active_attributes":{"name":"web","memory":8},"event":{"source":"creating","target":"up","trigger":"resource"},"timestamp":"2026-11-28T00:00:05Z"},
 {"version":4,"state":"start","candidate_attributes":{"name":"web","memory":8},"active_attributes":{"name":"web","memory":4},"event":{"source":"up","target":"start","trigger":"on_update","actor":"token:ops"},"timestamp":"2026-11-28T00:00:04Z"},
 {"version":3,"state":"up","active_attributes":{"name":"web","memory":4},"event":{"source":"creating","target":"up","trigger":"resource"},"timestamp":"2026-11-28T00:00:03Z"},
 {"version":2,"state":"creating","active_attributes":{"name":"web","memory":4},"event":{"source":"start","target":"creating","trigger":"auto"},"timestamp":"2026-11-28T00:00:02Z"},
 {"version":1,"state":"start","event":{"source":"","target":"start","trigger":"create"},"timestamp":"2026-11-28T00:00:01Z"}]}`

func (f *fakeRollbackLSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	problem := func(status int, body string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	p := r.URL.Path
	up := strings.Replace(fakeInstance, `"state":"failed"`, `"state":"up"`, 1)
	switch {
	case r.Method != http.MethodGet && r.Header.Get("Authorization") == "Bearer reader":
		problem(403, `{"type":"urn:intend:problem:forbidden","title":"Forbidden","status":403,"detail":"role read may not lsm.instance.dryrun"}`)
	case r.Method == http.MethodGet && (p == "/lsm/v1/service_inventory/vm/web" || p == "/lsm/v1/service_inventory/vm/"+fakeID):
		_, _ = io.WriteString(w, up)
	case r.Method == http.MethodGet && p == "/lsm/v1/service_inventory/vm/"+fakeID+"/log":
		_, _ = io.WriteString(w, rollbackLog)
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/rollback"):
		b, _ := io.ReadAll(r.Body)
		f.writes = append(f.writes, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		var req struct {
			CurrentVersion int64 `json:"current_version"`
			ToVersion      int64 `json:"to_version"`
		}
		_ = json.Unmarshal(b, &req)
		switch {
		case req.CurrentVersion != 5:
			problem(409, `{"type":"urn:intend:problem:conflict","title":"Conflict","status":409,`+
				`"detail":"service instance `+fakeID+` is at version 5, not 4: GET it and make the change against version 5",`+
				`"errors":[{"field":"/current_version","detail":"the current version is 5"}]}`)
		case req.ToVersion == 1:
			problem(422, `{"type":"urn:intend:problem:validation","title":"Invalid request","status":422,`+
				`"errors":[{"field":"/to_version","detail":"version 1 holds no attributes to restore"}]}`)
		default:
			_, _ = io.WriteString(w, strings.Replace(strings.Replace(up, `"version":5`, `"version":6`, 1), `"state":"up"`, `"state":"start"`, 1))
		}
	case r.Method == http.MethodPost && strings.HasSuffix(p, "/dryrun"):
		b, _ := io.ReadAll(r.Body)
		f.writes = append(f.writes, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		_, _ = io.WriteString(w, `{"service_entity":"vm","id":"`+fakeID+`","version":5,"state":"up","update_allowed":true,`+
			`"operation":"rollback","resulting_state":"start","export_mode":"export","candidate_attributes":{"name":"web","memory":4},"validation":{"ok":true},`+
			`"dryrun":{"run":9,"version":7,"action":"dryrun","status":"running","requested_at":"2026-11-28T00:00:00Z"}}`)
	default:
		f.fakeLSM.ServeHTTP(w, r)
	}
}

// TestInstanceRollbackForms: the log's rollback and its dry-run on the
// instance's page, against a fake API: which versions offer them, the
// confirmation first, exactly what the API gets, the API's refusals (a
// stale page's 409, a version with nothing to restore) shown on the
// instance's page as sentences, what the console refuses before the API
// hears of it, and a reader, who sees no button and whose forged posts
// are refused.
func TestInstanceRollbackForms(t *testing.T) {
	api := &fakeRollbackLSM{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	good := c.csrf("good")
	const base = "/console/env/prod/inventory"
	action := `action="/console/env/prod/inventory/vm/` + fakeID + `/rollback"`

	// An operator: versions 2 to 4 offer both buttons, with the page's
	// version; 5 (the current one) and 1 (no set) offer none.
	body := do(h, "GET", base+"/vm/web", "good", nil).Body.String()
	if n := strings.Count(body, action); n != 3 {
		t.Errorf("the page has %d rollback forms, want 3 (versions 2 to 4):\n%s", n, body)
	}
	for v := range 6 {
		btn := `aria-label="Roll back to this version: ` + string(rune('0'+v)) + `">Roll back to this version</button>`
		dry := `aria-label="Dry-run the rollback to version ` + string(rune('0'+v)) + `"`
		want := v >= 2 && v <= 4
		if strings.Contains(body, btn) != want || strings.Contains(body, dry) != want {
			t.Errorf("version %d: rollback button %v, dry-run %v; want %v", v, strings.Contains(body, btn), strings.Contains(body, dry), want)
		}
	}
	for _, want := range []string{
		`<input type="hidden" name="current_version" value="5">` + "\n        " + `<input type="hidden" name="to_version" value="3">`,
		`<input type="hidden" name="operation" value="rollback"><input type="hidden" name="to_version" value="4">`,
		`<th scope="col">Roll back</th>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the instance's page lacks %q:\n%s", want, body)
		}
	}
	// The failed instance of fakeLSM (a state that takes no update)
	// offers none: the API would refuse it.
	plain, _ := New(Options{API: &fakeLSM{}})
	if b := do(plain.Handler(), "GET", base+"/vm/web", "good", nil).Body.String(); strings.Contains(b, "/rollback\"") || strings.Contains(b, "Roll back</th>") {
		t.Errorf("a failed instance (no on_update) offers a rollback:\n%s", b)
	}
	// A reader: the log, no button.
	if b := do(h, "GET", base+"/vm/web", "reader", nil).Body.String(); strings.Contains(b, "/rollback\"") ||
		strings.Contains(b, "Roll back") || !strings.Contains(b, `<h2 id="log">Log</h2>`) {
		t.Errorf("the instance's page for a reader:\n%s", b)
	}

	// Asked first: the confirmation posts the same fields again, and the
	// API hears nothing yet.
	api.writes = nil
	w := do(h, "POST", base+"/vm/web/rollback", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "to_version": {"3"}})
	if body := w.Body.String(); w.Code != 200 || len(api.writes) != 0 ||
		!strings.Contains(body, `<form method="post" action="/console/env/prod/inventory/vm/web/rollback">`) ||
		!strings.Contains(body, `<input type="hidden" name="confirm" value="yes">`) ||
		!strings.Contains(body, `<input type="hidden" name="current_version" value="5">`) ||
		!strings.Contains(body, `<input type="hidden" name="to_version" value="3">`) ||
		!strings.Contains(body, `>Roll back to version 3</button>`) ||
		!strings.Contains(body, "The attributes it had at version 3 are sent as an update of version 5") {
		t.Errorf("an unconfirmed rollback = %d, the API got %q:\n%s", w.Code, api.writes, body)
	}

	rb := func(token string, kv ...string) url.Values {
		v := url.Values{"csrf": {c.csrf(token)}, "current_version": {"5"}, "confirm": {"yes"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		name, target, token string
		form                url.Values
		status              int
		want                []string // in the body, or the Location
		sent                string   // what the API gets ("": nothing)
	}{
		{"a rollback", base + "/vm/web/rollback", "good", rb("good", "to_version", "3"), 303,
			[]string{"/inventory/vm/" + fakeID + "?flash=Rollback+to+version+3+requested+%28state+start%2C+version+6%29."},
			`POST /lsm/v1/service_inventory/vm/web/rollback {"current_version":5,"to_version":3}`},
		{"a stale page: the API's 409 on the instance's page", base + "/vm/web/rollback", "good", rb("good", "current_version", "4", "to_version", "3"), 409,
			[]string{`<p class="error" role="alert">Conflict: service instance ` + fakeID + ` is at version 5, not 4: GET it and make the change against version 5; current_version: the current version is 5</p>`,
				`<dd data-field="version">5</dd>`},
			`POST /lsm/v1/service_inventory/vm/web/rollback {"current_version":4,"to_version":3}`},
		{"a version with nothing to restore: the API's 422", base + "/vm/web/rollback", "good", rb("good", "to_version", "1"), 422,
			[]string{`<p class="error" role="alert">Invalid request; to_version: version 1 holds no attributes to restore</p>`},
			`POST /lsm/v1/service_inventory/vm/web/rollback {"current_version":5,"to_version":1}`},
		{"a rollback's dry-run", base + "/vm/web/dryrun", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "operation": {"rollback"}, "to_version": {"4"}}, 303,
			[]string{"/console/env/prod/dryrun/9?flash=Dry-run+of+the+rollback%3A+up+would+lead+to+start+%28resources%3A+export%29."},
			`POST /lsm/v1/service_inventory/vm/web/dryrun {"operation":"rollback","current_version":5,"to_version":4}`},
		{"the current version", base + "/vm/web/rollback", "good", rb("good", "to_version", "5"), 422, []string{"before the current one (5)"}, ""},
		{"no version", base + "/vm/web/rollback", "good", rb("good"), 422, []string{"Name the version to roll back to"}, ""},
		{"a version that is no number", base + "/vm/web/rollback", "good", rb("good", "to_version", "3; drop"), 422, []string{"Name the version"}, ""},
		{"version 0", base + "/vm/web/rollback", "good", rb("good", "to_version", "0"), 422, []string{"Name the version"}, ""},
		{"a dry-run of a later version", base + "/vm/web/dryrun", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "operation": {"rollback"}, "to_version": {"7"}}, 422,
			[]string{"before the current one (5)"}, ""},
		{"without the page's version", base + "/vm/web/rollback", "good", rb("good", "current_version", "", "to_version", "3"), 422, []string{"current_version"}, ""},
		{"without the form token", base + "/vm/web/rollback", "good", url.Values{"current_version": {"5"}, "to_version": {"3"}, "confirm": {"yes"}}, 403, []string{"stale"}, ""},
		{"a reader's forged rollback", base + "/vm/web/rollback", "reader", rb("reader", "to_version", "3"), 403, []string{"may not roll back"}, ""},
		{"a reader's forged rollback, unconfirmed: no confirmation", base + "/vm/web/rollback", "reader", rb("reader", "to_version", "3", "confirm", ""), 403,
			[]string{"may not roll back"}, ""},
		{"a reader's forged dry-run: the API's 403", base + "/vm/web/dryrun", "reader",
			url.Values{"csrf": {c.csrf("reader")}, "current_version": {"5"}, "operation": {"rollback"}, "to_version": {"3"}}, 403, []string{"Forbidden"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api.writes = nil
			w := do(h, "POST", tc.target, tc.token, tc.form)
			got := w.Body.String() + w.Header().Get("Location")
			if w.Code != tc.status {
				t.Errorf("POST %s = %d, want %d:\n%s", tc.target, w.Code, tc.status, got)
			}
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("POST %s lacks %q:\n%s", tc.target, want, got)
				}
			}
			switch {
			case tc.sent == "" && len(api.writes) > 0:
				t.Errorf("the API got %q, want nothing", api.writes)
			case tc.sent != "" && (len(api.writes) != 1 || !sameWrite(api.writes[0], tc.sent)):
				t.Errorf("the API got %q, want %q", api.writes, tc.sent)
			}
		})
	}
}

// fakePagedLogLSM is fakeRollbackLSM whose log comes in pages of two
// versions (newest first), as the API pages it with before and next.
type fakePagedLogLSM struct {
	fakeRollbackLSM
	asked []string
}

func (f *fakePagedLogLSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/lsm/v1/service_inventory/vm/"+fakeID+"/log" {
		f.fakeRollbackLSM.ServeHTTP(w, r)
		return
	}
	f.asked = append(f.asked, r.URL.RawQuery)
	var all struct {
		Items []json.RawMessage `json:"items"`
	}
	_ = json.Unmarshal([]byte(rollbackLog), &all)
	from := 0 // the index of the first version below before
	if b := r.URL.Query().Get("before"); b != "" {
		from = 5 - int(b[0]-'0') + 1
	}
	page := map[string]any{"items": all.Items[from:min(from+2, len(all.Items))]}
	if from+2 < len(all.Items) {
		page["next"] = string(rune('0' + 5 - from - 1))
	}
	_ = json.NewEncoder(w).Encode(page)
}

// TestInstanceLogPages: an instance's page shows the newest page of its
// log with a link to the older versions; that page shows them, with a
// rollback to each that holds a set (so an instance with a long log can be
// rolled back to any of its versions) and a way back to the newest; a bad
// cursor is refused before the API hears of it.
func TestInstanceLogPages(t *testing.T) {
	api := &fakePagedLogLSM{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	const page = "/console/env/prod/inventory/vm/web"
	body := do(h, "GET", page, "good", nil).Body.String()
	if !strings.Contains(body, `<a rel="next" href="?log_before=4#log">Older versions</a>`) ||
		strings.Contains(body, "The newest versions") || strings.Contains(body, `name="to_version" value="3"`) {
		t.Errorf("the newest page of the log:\n%s", body)
	}
	body = do(h, "GET", page+"?log_before=4", "good", nil).Body.String()
	for _, want := range []string{
		`<input type="hidden" name="to_version" value="3">`,
		`aria-label="Roll back to this version: 2"`,
		`<a rel="next" href="?log_before=2#log">Older versions</a>`,
		`<a href="?#log">The newest versions</a>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the older page of the log lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `name="to_version" value="4"`) {
		t.Errorf("the older page shows version 4 too:\n%s", body)
	}
	if got := strings.Join(api.asked, " | "); got != "limit=100 | limit=100&before=4" {
		t.Errorf("the API was asked for the log with %q", got)
	}
	api.asked = nil
	if w := do(h, "GET", page+"?log_before=x", "good", nil); w.Code != http.StatusBadRequest ||
		!strings.Contains(w.Body.String(), "log_before names a version") || len(api.asked) != 0 {
		t.Errorf("a bad cursor: %d, the API asked %v:\n%s", w.Code, api.asked, w.Body.String())
	}
}
