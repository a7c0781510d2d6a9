package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
)

// fakeLSM answers the /lsm API for the token "good" (admin of "prod")
// and "reader" (read of "prod"): one entity, vm, and one instance of it,
// web, failed at version 5. It records the writes it gets; a create
// without a name gets the API's 422.
type fakeLSM struct{ writes []string }

const fakeID = "6f1c1d3a-5b0e-4f54-9a57-9e1a8c5f0d11"

const fakeEntity = `{"name":"vm","description":"A VM.","identity":"name","version":1,
 "attributes":[
  {"name":"name","modifier":"rw","required":true,"schema":{"type":"string","pattern":"^[a-z]+$"}},
  {"name":"memory","modifier":"rw+","required":false,"default":2,"schema":{"type":"integer","minimum":1,"maximum":64,"default":2}},
  {"name":"ratio","modifier":"rw+","required":false,"schema":{"type":"number","exclusiveMinimum":0}},
  {"name":"disk","modifier":"rw+","required":false,"default":"ssd","schema":{"type":"string","enum":["ssd","hdd"],"default":"ssd"}},
  {"name":"tags","modifier":"rw+","required":false,"schema":{"type":"array","items":{"type":"string"}}},
  {"name":"fqdn","modifier":"r","required":false,"schema":{"type":"string"}}],
 "lifecycle":{"name":"simple","start":"start",
  "states":{"start":{"name":"start","model_state":"candidate"},"up":{"name":"up","model_state":"active","export":true},
   "failed":{"name":"failed","model_state":"active","export":true},"creating":{"name":"creating","model_state":"active","export":true},
   "deleting":{"name":"deleting","model_state":"active","purge":true},"terminated":{"name":"terminated","model_state":"inactive","terminal":true}},
  "transfers":[{"source":"start","target":"creating","trigger":"auto","validate":true},
   {"source":"creating","target":"up","error":"failed","trigger":"resource"},
   {"source":"failed","target":"creating","trigger":"api"},
   {"source":"failed","target":"deleting","trigger":"on_delete"},
   {"source":"up","target":"deleting","trigger":"on_delete"},
   {"source":"up","target":"start","trigger":"on_update"},
   {"source":"deleting","target":"terminated","trigger":"resource"}]},
 "model_hash":"x","instances":{"failed":1},"registered_at":"2026-11-25T00:00:00Z","updated_at":"2026-11-25T00:00:00Z",
 "config":{"auto_transfers":true},"latest_version":1,"versions":[]}`

const fakeInstance = `{"id":"` + fakeID + `","service_entity":"vm","identity":"web","state":"failed","version":5,
 "service_entity_version":1,"candidate_attributes":null,"active_attributes":{"name":"web","memory":4,"disk":"ssd","fqdn":"web.example"},
 "rollback_attributes":null,"metadata":{"owner":"ops <b>"},"deleted":false,"created_at":"2026-11-25T00:00:00Z","last_updated":"2026-11-25T00:00:00Z",
 "deployment":{"total":1,"deployed":0,"failed":1},"referenced_by":[]}`

func (f *fakeLSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	problem := func(status int, body string) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
	auth := r.Header.Get("Authorization")
	if auth != "Bearer good" && auth != "Bearer reader" {
		problem(401, `{"type":"urn:intend:problem:unauthenticated","title":"Unauthenticated","status":401}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/v1/whoami" {
		role := map[string]string{"Bearer good": "admin", "Bearer reader": "read"}[auth]
		_, _ = io.WriteString(w, `{"kind":"token","name":"t","actor":"token:t","role":"none","environments":{"prod":"`+role+`"}}`)
		return
	}
	if r.Header.Get("X-Intend-Environment") != "prod" {
		problem(404, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404,"detail":"environment not found"}`)
		return
	}
	if r.Method != http.MethodGet {
		var b []byte
		if r.Body != nil {
			b, _ = io.ReadAll(r.Body)
		}
		f.writes = append(f.writes, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		if r.Method == http.MethodPost && r.URL.Path == "/lsm/v1/service_inventory/vm" && !strings.Contains(string(b), `"name"`) {
			problem(422, `{"type":"urn:intend:problem:validation","title":"Invalid request","status":422,"detail":"invalid attributes: name: required",
			 "errors":[{"field":"/attributes/name","detail":"name: required"}]}`)
			return
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/dryrun") {
			var req struct {
				Operation string `json:"operation"`
			}
			_ = json.Unmarshal(b, &req)
			_, _ = io.WriteString(w, `{"service_entity":"vm","id":"`+fakeID+`","version":5,"state":"failed","update_allowed":false,`+
				`"operation":"`+req.Operation+`","resulting_state":"deleting","export_mode":"purge","candidate_attributes":{},"validation":{"ok":true},`+
				`"desired_state":{"base_version":2,"added":[],"removed":["fs::File[h,path=/web.conf]"],"modified":[],"unchanged":[]}}`)
			return
		}
		if r.Method == http.MethodPost && r.URL.Path == "/lsm/v1/service_inventory/vm" {
			w.WriteHeader(http.StatusCreated)
		}
		_, _ = io.WriteString(w, strings.Replace(fakeInstance, `"deployment":{"total":1,"deployed":0,"failed":1},"referenced_by":[],`, "", 1))
		return
	}
	switch r.URL.Path {
	case "/lsm/v1/service_catalog":
		_, _ = io.WriteString(w, `{"items":[`+fakeEntity+`]}`)
	case "/lsm/v1/service_catalog/vm":
		_, _ = io.WriteString(w, fakeEntity)
	case "/lsm/v1/service_inventory/vm":
		_, _ = io.WriteString(w, `{"items":[`+fakeInstance+`]}`)
	case "/lsm/v1/service_inventory/vm/web", "/lsm/v1/service_inventory/vm/" + fakeID:
		_, _ = io.WriteString(w, fakeInstance)
	case "/lsm/v1/service_inventory/vm/" + fakeID + "/config":
		_, _ = io.WriteString(w, `{"id":"`+fakeID+`","service_entity":"vm","auto_transfers":true,"effective":{"auto_transfers":true,"auto_transfer_configs":{}}}`)
	case "/lsm/v1/service_inventory/vm/" + fakeID + "/resources":
		_, _ = io.WriteString(w, `{"items":[]}`)
	case "/lsm/v1/service_inventory/vm/" + fakeID + "/log":
		_, _ = io.WriteString(w, `{"items":[{"version":3,"state":"rejected","candidate_attributes":{"memory":99},`+
			`"event":{"source":"start","target":"rejected","trigger":"create","error":true},`+
			`"errors":[{"path":"parameter.memory","message":"invalid value 99 (out of bound <=64)",`+
			`"positions":[{"file":"vm.cue","line":7,"column":11}]}],"timestamp":"2026-11-25T00:00:00Z"}]}`)
	case "/lsm/v1/service_inventory/vm/" + fakeID + "/diagnose":
		_, _ = io.WriteString(w, `{"id":"`+fakeID+`","state":"failed","version":4,"validation":{"version":3,"errors":[{"message":"memory: too big",`+
			`"instance":"vm web","positions":[{"file":"vm.cue","line":7,"column":11}]}]},`+
			`"resources":[{"id":"fs::File[h,path=/web.conf]","type":"fs::File","agent":"h","intent_version":2,"intent_hash":"","deployed_hash":"",`+
			`"last_result":"failed","compliance":"non_compliant","blocked":false,"orphan":false,"last_attempt":null,"last_success":null,`+
			`"last_produced_change":false,"error":"permission denied","logs":[{"level":"error","msg":"open failed","attrs":{"path":"/web.conf"}}]}]}`)
	default:
		problem(404, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404,"detail":"service entity \"nope\" not found"}`)
	}
}

// TestInventoryRefusesBadInput: the inventory's pages and forms with what
// a careless or hostile browser sends; nothing refused reaches the API,
// and each refused value is shown next to its field, as typed.
func TestInventoryRefusesBadInput(t *testing.T) {
	api := &fakeLSM{}
	c, err := New(Options{API: api})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	good := c.csrf("good")
	const base = "/console/env/prod/inventory"
	create := func(kv ...string) url.Values {
		v := url.Values{"csrf": {good}, "attr-name": {"web"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		name, method, target, token string
		form                        url.Values
		status                      int
		want                        []string // in the body, or the Location
	}{
		{"an entity name that is none", "GET", base + "/no%20such", "good", nil, 404, []string{"not the name of a service entity"}},
		{"an unknown entity: the API's 404", "GET", base + "/nope", "good", nil, 404, []string{"not found"}},
		{"a state with markup", "GET", base + "/vm?state=%3Cb%3E", "good", nil, 400, []string{"&#34;&lt;b&gt;&#34; is not a state"}},
		{"a state the lifecycle lacks", "GET", base + "/vm?state=gone", "good", nil, 400, []string{"has no state &#34;gone&#34;"}},
		{"a cursor that is no id", "GET", base + "/vm?after=1%27%20or%201=1", "good", nil, 400, []string{"cursor"}},
		{"an environment unknown to the API", "GET", "/console/env/other/inventory", "good", nil, 404, []string{"environment not found"}},
		{"a create form for a read token", "GET", base + "/vm/new", "reader", nil, 403, []string{"may not create"}},
		{"a create without the form token", "POST", base + "/vm/new", "good", url.Values{"attr-name": {"web"}}, 403, []string{"stale"}},
		{"a create with another's form token", "POST", base + "/vm/new", "good", url.Values{"attr-name": {"web"}, "csrf": {c.csrf("x")}}, 403, []string{"stale"}},
		{"a memory that is no number", "POST", base + "/vm/new", "good", create("attr-memory", "four"), 422,
			[]string{`&#34;four&#34; is not a whole number`, `id="attr-memory-error"`, `aria-describedby="attr-memory-help attr-memory-error"`, `value="four"`, `aria-invalid="true"`}},
		{"a memory with a fraction", "POST", base + "/vm/new", "good", create("attr-memory", "2.5"), 422, []string{"not a whole number"}},
		{"a memory beyond int64", "POST", base + "/vm/new", "good", create("attr-memory", "99999999999999999999"), 422, []string{"not a whole number"}},
		{"a memory below the minimum", "POST", base + "/vm/new", "good", create("attr-memory", "0"), 422, []string{"must be at least 1"}},
		{"a memory above the maximum", "POST", base + "/vm/new", "good", create("attr-memory", "65"), 422, []string{"must be at most 64"}},
		{"a ratio that is NaN", "POST", base + "/vm/new", "good", create("attr-ratio", "NaN"), 422, []string{"&#34;NaN&#34; is not a number"}},
		{"a ratio that is infinite", "POST", base + "/vm/new", "good", create("attr-ratio", "1e999"), 422, []string{"is not a number"}},
		{"a ratio at its exclusive minimum", "POST", base + "/vm/new", "good", create("attr-ratio", "0"), 422, []string{"must be more than 0"}},
		{"a disk not among the choices", "POST", base + "/vm/new", "good", create("attr-disk", `"floppy"`), 422, []string{"choose one of the listed values"}},
		{"tags that are not JSON", "POST", base + "/vm/new", "good", create("attr-tags", `["a",`), 422, []string{"not valid JSON", `id="attr-tags-error"`}},
		{"two JSON values", "POST", base + "/vm/new", "good", create("attr-tags", `[] []`), 422, []string{"more than one value"}},
		{"a name against its pattern", "POST", base + "/vm/new", "good", create("attr-name", "Web 1"), 422,
			[]string{"must match the pattern ^[a-z]&#43;$", `value="Web 1"`}},
		{"a name that is not UTF-8", "POST", base + "/vm/new", "good", create("attr-name", "\xff"), 422, []string{"not valid text"}},
		{"no name: the API's 422 next to the field", "POST", base + "/vm/new", "good", create("attr-name", "", "attr-memory", "7"), 422,
			[]string{`<p class="field-error" id="attr-name-error">name: required</p>`, `aria-describedby="attr-name-error"`, `value="7"`}},
		{"a form too large", "POST", base + "/vm/new", "good", create("attr-name", strings.Repeat("a", 70<<10)), 413, []string{"too large"}},
		{"an update without its version", "POST", base + "/vm/web/update", "good", url.Values{"csrf": {good}, "attr-memory": {"8"}}, 422, []string{"current_version"}},
		{"an update with a version that is no number", "POST", base + "/vm/web/update", "good", url.Values{"csrf": {good}, "current_version": {"5; drop"}}, 422, []string{"current_version"}},
		{"an update without the form token", "POST", base + "/vm/web/update", "good", url.Values{"current_version": {"5"}}, 403, []string{"stale"}},
		{"an update that changes nothing", "POST", base + "/vm/web/update", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "attr-memory": {"4"}}, 422, []string{"Nothing changed"}},
		{"an update with a bad value", "POST", base + "/vm/web/update", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "attr-memory": {"x"}}, 422,
			[]string{"not a whole number", `value="x"`}},
		{"a transfer without a target", "POST", base + "/vm/web/state", "good", url.Values{"csrf": {good}, "current_version": {"5"}}, 422, []string{"Name the state"}},
		{"a transfer to a path", "POST", base + "/vm/web/state", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "target": {"../up"}}, 422, []string{"Name the state"}},
		{"a dry-run of no write", "POST", base + "/vm/web/dryrun", "good", url.Values{"csrf": {good}, "current_version": {"5"}}, 422, []string{"Name the write"}},
		{"a dry-run move to a path", "POST", base + "/vm/web/dryrun", "good", url.Values{"csrf": {good}, "current_version": {"5"}, "operation": {"set_state"}, "target": {"../up"}}, 422, []string{"Name the state"}},
		{"a dry-run without the form token", "POST", base + "/vm/web/dryrun", "good", url.Values{"current_version": {"5"}, "operation": {"delete"}}, 403, []string{"stale"}},
		{"a delete with version 0", "POST", base + "/vm/web/delete", "good", url.Values{"csrf": {good}, "current_version": {"0"}}, 422, []string{"current_version"}},
		{"a delete without the form token", "POST", base + "/vm/web/delete", "reader", url.Values{"current_version": {"5"}}, 403, []string{"stale"}},
		{"metadata without the form token", "POST", base + "/vm/web/metadata", "good", url.Values{"key": {"owner"}, "value": {"x"}}, 403, []string{"stale"}},
		{"metadata without a key", "POST", base + "/vm/web/metadata", "good", url.Values{"csrf": {good}, "value": {"x"}}, 422, []string{"Name the metadata key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := do(h, tc.method, tc.target, tc.token, tc.form)
			got := w.Body.String() + w.Header().Get("Location")
			if w.Code != tc.status {
				t.Errorf("%s %s = %d, want %d:\n%s", tc.method, tc.target, w.Code, tc.status, got)
			}
			for _, want := range tc.want {
				if !strings.Contains(got, want) {
					t.Errorf("%s %s lacks %q:\n%s", tc.method, tc.target, want, got)
				}
			}
		})
	}
	if len(api.writes) != 1 || !strings.HasPrefix(api.writes[0], "POST /lsm/v1/service_inventory/vm ") {
		t.Errorf("the API got writes other than the create without a name: %q", api.writes)
	}

	// The pages a good token sees: the buttons its role allows, those the
	// state allows only.
	api.writes = nil
	w := do(h, "GET", base+"/vm/web", "good", nil)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "Move to creating") || !strings.Contains(body, ">Delete</button>") ||
		!strings.Contains(body, ">Dry-run move to creating</button>") || !strings.Contains(body, ">Dry-run delete</button>") ||
		strings.Contains(body, "Move to deleting") || strings.Contains(body, `/update"`) {
		t.Errorf("a failed instance for an admin: %d\n%s", w.Code, body)
	}
	if !strings.Contains(body, `<dt><code>owner</code></dt><dd><code>&#34;ops \u003cb\u003e&#34;</code></dd>`) ||
		!strings.Contains(body, `action="/console/env/prod/inventory/vm/`+fakeID+`/metadata"`) {
		t.Errorf("an instance's page for an operator lacks its metadata or their form:\n%s", body)
	}
	if !strings.Contains(body, "The validation of version 3 failed") || !strings.Contains(body, "memory: too big") ||
		!strings.Contains(body, "permission denied") {
		t.Errorf("a failed instance's page lacks its diagnosis:\n%s", body)
	}
	// Read as text, not JSON: each problem with where it is, the failed
	// resource's adapter log, the log's errors likewise.
	for _, want := range []string{
		"<li><code>vm web</code>: memory: too big\n    <br><small>at <code>vm.cue:7:11</code></small></li>",
		"error open failed path=/web.conf",
		"<li><code>parameter.memory</code>: invalid value 99 (out of bound &lt;=64)\n    <br><small>at <code>vm.cue:7:11</code></small></li>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("a failed instance's page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `&#34;message&#34;`) || strings.Contains(body, `"message"`) {
		t.Errorf("a failed instance's page shows its errors as JSON:\n%s", body)
	}
	w = do(h, "GET", base+"/vm/web", "reader", nil)
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, "<button type=\"submit\"") && strings.Count(body, "<button") > 1 ||
		strings.Contains(body, "Move to") || strings.Contains(body, "Delete</button>") ||
		strings.Contains(body, "/metadata\"") || !strings.Contains(body, "<code>owner</code>") {
		t.Errorf("a failed instance for a reader: %d\n%s", w.Code, body)
	}
	w = do(h, "GET", base, "reader", nil)
	if body := w.Body.String(); w.Code != 200 || strings.Contains(body, "New vm") || !strings.Contains(body, "integer (≥1, ≤64)") ||
		!strings.Contains(body, `role="img"`) || !strings.Contains(body, `class="lc-name">failed</text>`) {
		t.Errorf("the catalog for a reader: %d\n%s", w.Code, body)
	}

	// Delete asks first: a page whose form posts the same fields again,
	// confirmed, with the user's form token; the API hears nothing yet.
	api.writes = nil
	w = do(h, "POST", base+"/vm/web/delete", "good", url.Values{"csrf": {good}, "current_version": {"5"}})
	if body := w.Body.String(); w.Code != 200 || len(api.writes) != 0 ||
		!strings.Contains(body, `<form method="post" action="/console/env/prod/inventory/vm/web/delete">`) ||
		!strings.Contains(body, `<input type="hidden" name="confirm" value="yes">`) ||
		!strings.Contains(body, `<input type="hidden" name="current_version" value="5">`) ||
		!strings.Contains(body, `name="csrf" value="`+good+`"`) {
		t.Errorf("an unconfirmed delete = %d, the API got %q:\n%s", w.Code, api.writes, body)
	}

	// Good forms: what the API gets, and where the browser goes.
	for _, tc := range []struct {
		target string
		form   url.Values
		sent   string
		flash  string
	}{
		{base + "/vm/new", create("attr-memory", "8", "attr-disk", `"hdd"`, "attr-tags", `["a","b"]`, "attr-ratio", "0.5"),
			`POST /lsm/v1/service_inventory/vm {"attributes":{"disk":"hdd","memory":8,"name":"web","ratio":0.5,"tags":["a","b"]}}`, "Created+vm+web"},
		{base + "/vm/web/update", url.Values{"csrf": {good}, "current_version": {"5"}, "attr-memory": {"8"}, "attr-disk": {`"ssd"`}},
			`PATCH /lsm/v1/service_inventory/vm/` + fakeID + ` {"current_version":5,"attributes":{"memory":8}}`, "Update+requested"},
		{base + "/vm/web/state", url.Values{"csrf": {good}, "current_version": {"5"}, "target": {"creating"}},
			`POST /lsm/v1/services/vm/web/state {"current_version":5,"target_state":"creating"}`, "Moved+to"},
		{base + "/vm/web/delete", url.Values{"csrf": {good}, "current_version": {"5"}, "confirm": {"yes"}},
			`DELETE /lsm/v1/service_inventory/vm/web?current_version=5 `, "Delete+requested"},
		{base + "/vm/web/dryrun", url.Values{"csrf": {good}, "current_version": {"5"}, "operation": {"delete"}},
			`POST /lsm/v1/service_inventory/vm/web/dryrun {"operation":"delete","current_version":5}`, "Dry-run+of+the+delete"},
		{base + "/vm/web/dryrun", url.Values{"csrf": {good}, "current_version": {"5"}, "operation": {"set_state"}, "target": {"creating"}},
			`POST /lsm/v1/service_inventory/vm/web/dryrun {"operation":"set_state","current_version":5,"target_state":"creating"}`, "Dry-run+of+the+set-state"},
		{base + "/vm/web/metadata", url.Values{"csrf": {good}, "key": {"ticket"}, "value": {`{"id": 7}`}},
			`PATCH /lsm/v1/service_inventory/vm/web/metadata {"metadata":{"ticket":{"id":7}}}`, "Metadata+ticket+set"},
		{base + "/vm/web/metadata", url.Values{"csrf": {good}, "key": {"owner"}, "value": {"ops"}},
			`PATCH /lsm/v1/service_inventory/vm/web/metadata {"metadata":{"owner":"ops"}}`, "Metadata+owner+set"},
		{base + "/vm/web/metadata", url.Values{"csrf": {good}, "key": {"owner"}, "value": {""}},
			`PATCH /lsm/v1/service_inventory/vm/web/metadata {"metadata":{"owner":null}}`, "Metadata+owner+removed"},
	} {
		api.writes = nil
		w := do(h, "POST", tc.target, "good", tc.form)
		if w.Code != 303 || !strings.Contains(w.Header().Get("Location"), "/console/env/prod/inventory/vm/"+fakeID+"?flash="+tc.flash) ||
			len(api.writes) != 1 || !sameWrite(api.writes[0], tc.sent) {
			t.Errorf("POST %s = %d %q; the API got %q, want %q", tc.target, w.Code, w.Header().Get("Location"), api.writes, tc.sent)
		}
	}
}

// sameWrite compares two recorded writes, their JSON bodies as values.
func sameWrite(got, want string) bool {
	gi, wi := strings.Index(got, "{"), strings.Index(want, "{")
	if gi < 0 || wi < 0 {
		return strings.TrimSpace(got) == strings.TrimSpace(want)
	}
	if got[:gi] != want[:wi] {
		return false
	}
	var g, x any
	if json.Unmarshal([]byte(got[gi:]), &g) != nil || json.Unmarshal([]byte(want[wi:]), &x) != nil {
		return false
	}
	a, _ := json.Marshal(g)
	b, _ := json.Marshal(x)
	return string(a) == string(b)
}

// TestLifecycleDiagram: every state gets a box, every transfer (and its
// error state) a curve; a state the start does not reach goes in a row
// of its own; the boxes do not overlap.
func TestLifecycleDiagram(t *testing.T) {
	var e struct {
		Lifecycle client.Lifecycle `json:"lifecycle"`
	}
	if err := json.Unmarshal([]byte(fakeEntity), &e); err != nil {
		t.Fatal(err)
	}
	l := e.Lifecycle
	l.States["orphan"] = client.LifecycleState{Name: "orphan", ModelState: "inactive"}
	rows := lifecycleRows(l, map[string]int{"failed": 2})
	d := layout("vm", l, rows)
	if len(d.Nodes) != len(l.States) {
		t.Fatalf("%d boxes for %d states", len(d.Nodes), len(l.States))
	}
	edges := 0
	for _, tr := range l.Transfers {
		edges++
		if tr.Error != "" {
			edges++
		}
	}
	if len(d.Edges) != edges {
		t.Errorf("%d curves for %d transfers and error states", len(d.Edges), edges)
	}
	byName := map[string]dnode{}
	for i, a := range d.Nodes {
		byName[a.Name] = a
		for _, b := range d.Nodes[i+1:] {
			if a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H {
				t.Errorf("%s and %s overlap", a.Name, b.Name)
			}
		}
		if a.X < 0 || a.Y < 0 || a.X+a.W > d.W || a.Y+a.H > d.H {
			t.Errorf("%s is outside the drawing", a.Name)
		}
	}
	maxY := 0
	for _, n := range d.Nodes {
		if n.Name != "orphan" {
			maxY = max(maxY, n.Y)
		}
	}
	if byName["start"].Y != margin || byName["orphan"].Y <= maxY {
		t.Errorf("start at %d, orphan at %d: want start on the first row and orphan on the last", byName["start"].Y, byName["orphan"].Y)
	}
	if !strings.Contains(byName["failed"].Class, "occupied") || !strings.Contains(byName["start"].Class, "start") ||
		!strings.Contains(byName["terminated"].Class, "terminal") {
		t.Errorf("classes: %+v", d.Nodes)
	}
}
