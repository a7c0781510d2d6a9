package console

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// fakeModelLSM is fakeLSM with the service model of issue 31: vm's
// lifecycle names its start → creating auto transfer auto_create and lets
// a create begin in creating; it answers an instance's config, the
// pools, and a create's dry-run, and refuses a reader's writes (403) as
// the API does.
type fakeModelLSM struct {
	fakeLSM
	// dryrunFails: the create's dry-run finds the model refusing it.
	dryrunFails bool
}

var modelEntity = strings.Replace(strings.Replace(fakeEntity,
	`{"source":"start","target":"creating","trigger":"auto","validate":true}`,
	`{"source":"start","target":"creating","trigger":"auto","validate":true,"config_name":"auto_create"}`, 1),
	`"lifecycle":{"name":"simple","start":"start",`, `"lifecycle":{"name":"simple","start":"start","initial_states":["creating"],`, 1)

func (f *fakeModelLSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reader := r.Header.Get("Authorization") == "Bearer reader"
	p := r.URL.Path
	switch {
	case r.Method != http.MethodGet && reader && r.URL.Path != "/api/v1/whoami":
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"type":"urn:intend:problem:forbidden","title":"Forbidden","status":403,"detail":"role read may not lsm.catalog.configure"}`)
	case r.Method == http.MethodGet && p == "/lsm/v1/service_catalog":
		_, _ = io.WriteString(w, `{"items":[`+modelEntity+`]}`)
	case r.Method == http.MethodGet && p == "/lsm/v1/service_catalog/vm":
		_, _ = io.WriteString(w, modelEntity)
	case r.Method == http.MethodGet && p == "/lsm/v1/service_inventory/vm/"+fakeID+"/config":
		_, _ = io.WriteString(w, `{"id":"`+fakeID+`","service_entity":"vm","auto_transfers":true,"auto_transfer_configs":{"auto_create":false},`+
			`"effective":{"auto_transfers":true,"auto_transfer_configs":{"auto_create":false}}}`)
	case r.Method == http.MethodGet && p == "/lsm/v1/pools":
		_, _ = io.WriteString(w, `{"items":[{"name":"vlan","kind":"vlan","from":100,"to":199,"values":100,"used":1,"free":99},`+
			`{"name":"p2p","kind":"cidr","prefix":"10.0.0.0/29","size":30,"values":2,"used":2,"free":0}]}`)
	case r.Method == http.MethodGet && p == "/lsm/v1/pools/vlan":
		_, _ = io.WriteString(w, `{"name":"vlan","kind":"vlan","from":100,"to":199,"values":100,"used":1,"free":99,`+
			`"allocations":[{"value":100,"service_entity":"vm","instance_id":"`+fakeID+`","attribute":"vlan_id","allocated_at":"2026-11-28T00:00:00Z"}],"next":"100"}`)
	case r.Method == http.MethodPost && p == "/lsm/v1/service_inventory/vm/dryrun":
		b, _ := io.ReadAll(r.Body)
		f.writes = append(f.writes, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		if !strings.Contains(string(b), `"name"`) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"type":"urn:intend:problem:validation","title":"Invalid request","status":422,"detail":"invalid attributes: name: required",
			 "errors":[{"field":"/attributes/name","detail":"name: required"}]}`)
			return
		}
		if f.dryrunFails {
			_, _ = io.WriteString(w, `{"service_entity":"vm","id":"`+fakeID+`","version":0,"state":"","operation":"create",`+
				`"resulting_state":"rejected","export_mode":"none","update_allowed":false,"candidate_attributes":{},`+
				`"validation":{"ok":false,"errors":[{"path":"parameter.memory","message":"invalid value 99 (out of bound <=64)","positions":[{"file":"vm.cue","line":7,"column":11}]}]}}`)
			return
		}
		_, _ = io.WriteString(w, `{"service_entity":"vm","id":"`+fakeID+`","version":0,"state":"","operation":"create",`+
			`"resulting_state":"creating","export_mode":"export","update_allowed":false,"candidate_attributes":{},"validation":{"ok":true},`+
			`"dryrun":{"run":9,"version":2,"action":"dryrun","status":"running","requested_at":"2026-11-28T00:00:00Z"}}`)
	case r.Method == http.MethodPatch && strings.HasSuffix(p, "/config"):
		b, _ := io.ReadAll(r.Body)
		f.writes = append(f.writes, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		if strings.HasPrefix(p, "/lsm/v1/service_catalog/") {
			_, _ = io.WriteString(w, modelEntity)
			return
		}
		_, _ = io.WriteString(w, `{"id":"`+fakeID+`","service_entity":"vm","auto_transfers":true,"effective":{"auto_transfers":true,"auto_transfer_configs":{"auto_create":true}}}`)
	default:
		f.fakeLSM.ServeHTTP(w, r)
	}
}

// TestServiceModelForms: the auto-transfer config forms of an entity and
// an instance, the create's dry-run and initial state, and the pools'
// pages, against a fake API: what each form sends (only what changed),
// where the browser goes, what a reader sees and may not post, and each
// bad value shown as a sentence before the API hears of it.
func TestServiceModelForms(t *testing.T) {
	api := &fakeModelLSM{}
	key := bytes.Repeat([]byte{7}, 32)
	c, err := New(Options{API: api, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	good := c.csrf("good")
	const base = "/console/env/prod/inventory"

	// The pages: a form for an admin, the values for a reader.
	body := do(h, "GET", base+"/vm", "good", nil).Body.String()
	for _, want := range []string{`action="/console/env/prod/inventory/vm/config"`, `<select id="auto-wide" name="auto_transfers">`,
		`<input type="hidden" name="was-cfg-auto_create" value="on">`, `<label for="auto-auto_create">`, "start → creating"} {
		if !strings.Contains(body, want) {
			t.Errorf("the entity's page for an admin lacks %q:\n%s", want, body)
		}
	}
	body = do(h, "GET", base+"/vm", "reader", nil).Body.String()
	if strings.Contains(body, "/config\"") || strings.Contains(body, "<select id=\"auto-") ||
		!strings.Contains(body, `<span data-switch="auto_create">on</span>`) {
		t.Errorf("the entity's page for a reader: want the values and no form:\n%s", body)
	}
	body = do(h, "GET", base+"/vm/web", "good", nil).Body.String()
	for _, want := range []string{`action="/console/env/prod/inventory/vm/` + fakeID + `/config"`,
		`<option value="off" selected>off</option><option value="default">default (the entity's: on)</option>`,
		`<span class="badge bad">off</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the instance's page for an admin lacks %q:\n%s", want, body)
		}
	}
	body = do(h, "GET", base+"/vm/web", "reader", nil).Body.String()
	if strings.Contains(body, "/config\"") || !strings.Contains(body, `<span data-switch="auto_create">off</span>`) {
		t.Errorf("the instance's page for a reader: want the values and no form:\n%s", body)
	}
	body = do(h, "GET", base+"/vm/new", "good", nil).Body.String()
	if !strings.Contains(body, `<option value="start" selected>start (the lifecycle&#39;s start)</option><option value="creating">creating</option>`) ||
		!strings.Contains(body, `<button type="submit" name="dryrun" value="1"`) {
		t.Errorf("the create form lacks the initial state or the dry-run:\n%s", body)
	}

	cfg := func(kv ...string) url.Values {
		v := url.Values{"csrf": {good}, "auto_transfers": {"on"}, "was-auto_transfers": {"on"}, "cfg-auto_create": {"on"}, "was-cfg-auto_create": {"on"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	create := func(kv ...string) url.Values {
		v := url.Values{"csrf": {good}, "attr-name": {"web"}}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	for _, tc := range []struct {
		name, target, token string
		form                url.Values
		status              int
		want                []string
		sent                string // the API's write; "" for none
	}{
		{"an entity's switch turned off: only it is sent", base + "/vm/config", "good", cfg("cfg-auto_create", "off"), 303,
			[]string{"/console/env/prod/inventory/vm?flash=Auto+transfers+of+vm+saved%3A+auto_create+off."},
			`PATCH /lsm/v1/service_catalog/vm/config {"auto_transfer_configs":{"auto_create":false}}`},
		{"the entity-wide switch", base + "/vm/config", "good", cfg("auto_transfers", "off"), 303, []string{"auto+transfers+off"},
			`PATCH /lsm/v1/service_catalog/vm/config {"auto_transfers":false}`},
		{"an instance's name back to its entity's", base + "/vm/web/config", "good", cfg("cfg-auto_create", "default", "was-cfg-auto_create", "off"), 303,
			[]string{"/inventory/vm/" + fakeID + "?flash=Auto+transfers+of+this+instance+saved%3A+auto_create+default."},
			`PATCH /lsm/v1/service_inventory/vm/web/config {"auto_transfer_configs":{"auto_create":null}}`},
		{"nothing changed", base + "/vm/config", "good", cfg(), 422, []string{"Nothing changed"}, ""},
		{"a value neither on nor off", base + "/vm/config", "good", cfg("cfg-auto_create", "maybe"), 422,
			[]string{`<p class="error" role="alert">auto_create: &#34;maybe&#34; is neither on nor off.</p>`}, ""},
		{"default for an entity", base + "/vm/config", "good", cfg("cfg-auto_create", "default"), 422, []string{"is neither on nor off"}, ""},
		{"a wide switch neither on nor off", base + "/vm/web/config", "good", cfg("auto_transfers", ""), 422,
			[]string{"Auto transfers: &#34;&#34; is neither on nor off."}, ""},
		{"a bad value for an instance", base + "/vm/web/config", "good", cfg("cfg-auto_create", "yes"), 422,
			[]string{"auto_create: &#34;yes&#34; is not on, off or default."}, ""},
		{"a name the lifecycle lacks", base + "/vm/config", "good", cfg("cfg-auto_delete", "off"), 422,
			[]string{"The lifecycle simple has no auto transfer named &#34;auto_delete&#34; (it has: auto_create)"}, ""},
		{"a config form without its token", base + "/vm/config", "good", url.Values{"auto_transfers": {"off"}}, 403, []string{"stale"}, ""},
		{"a reader's forged config form: the API's 403", base + "/vm/config", "reader", cfg("cfg-auto_create", "off", "csrf", c.csrf("reader")), 403,
			[]string{"may not lsm.catalog.configure"}, ""},
		{"a create's dry-run", base + "/vm/new", "good", create("attr-memory", "8", "dryrun", "1"), 303,
			[]string{"/console/env/prod/dryrun/9?flash=Dry-run+of+the+create%3A+the+new+instance+would+lead+to+creating"},
			`POST /lsm/v1/service_inventory/vm/dryrun {"attributes":{"memory":8,"name":"web"}}`},
		{"a create's dry-run with a bad value: no dry-run", base + "/vm/new", "good", create("attr-memory", "99", "dryrun", "1"), 422,
			[]string{"must be at most 64"}, ""},
		{"a create's dry-run refused by the API, next to its field", base + "/vm/new", "good", create("attr-name", "", "dryrun", "1"), 422,
			[]string{`id="attr-name-error">name: required`}, `POST /lsm/v1/service_inventory/vm/dryrun {"attributes":{}}`},
		{"a create in an initial state", base + "/vm/new", "good", create("initial_state", "creating"), 303, []string{"Created+vm+web"},
			`POST /lsm/v1/service_inventory/vm {"attributes":{"name":"web"},"initial_state":"creating"}`},
		{"a create in the start state sends none", base + "/vm/new", "good", create("initial_state", "start"), 303, []string{"Created+vm+web"},
			`POST /lsm/v1/service_inventory/vm {"attributes":{"name":"web"}}`},
		{"an initial state the lifecycle does not allow", base + "/vm/new", "good", create("initial_state", "up"), 422,
			[]string{`<p class="field-error" id="initial-state-error">&#34;up&#34; is not a state a create may begin in: choose start or one of creating.</p>`,
				`aria-describedby="initial-state-help initial-state-error" aria-invalid="true"`}, ""},
		{"a reader's forged create dry-run: the API's 403", base + "/vm/new", "reader", create("dryrun", "1", "csrf", c.csrf("reader")), 403,
			[]string{"Forbidden"}, ""},
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

	// A dry-run the model refuses stays on the form, values kept, with
	// the validation's errors as sentences.
	api.dryrunFails = true
	w := do(h, "POST", base+"/vm/new", "good", create("attr-memory", "8", "dryrun", "1"))
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, "Its validation would fail. Nothing was created.") ||
		!strings.Contains(body, "<code>parameter.memory</code>: invalid value 99 (out of bound &lt;=64)<br><small>at <code>vm.cue:7:11</code>") ||
		!strings.Contains(body, `value="8"`) {
		t.Errorf("a refused dry-run = %d:\n%s", w.Code, body)
	}

	// A form rendered by one replica is taken by another that shares the
	// key: nothing about it is kept on the server.
	other, err := New(Options{API: api, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(do(h, "GET", base+"/vm", "good", nil).Body.String())
	api.writes = nil
	w = do(other.Handler(), "POST", base+"/vm/config", "good", cfg("csrf", token[1], "cfg-auto_create", "off"))
	if w.Code != 303 || len(api.writes) != 1 {
		t.Errorf("a config form of one replica posted to another = %d, the API got %q", w.Code, api.writes)
	}

	// The pools: a reader reads them; a pool links each value to its
	// instance and its next page.
	body = do(h, "GET", "/console/env/prod/pools", "reader", nil).Body.String()
	for _, want := range []string{`<a href="/console/env/prod/pools/vlan">vlan</a></td><td>vlan</td><td>100–199</td>`,
		"<td>/30 of 10.0.0.0/29</td>", `<span class="badge bad">0</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the pools page lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(do(h, "GET", base, "reader", nil).Body.String(), `href="/console/env/prod/pools"`) {
		t.Error("the catalog does not link the pools")
	}
	body = do(h, "GET", "/console/env/prod/pools/vlan", "reader", nil).Body.String()
	for _, want := range []string{"1 of 100 (99 free)", `<a href="/console/env/prod/inventory/vm/` + fakeID + `"><code>` + fakeID + `</code></a>`,
		"<code>vlan_id</code>", `href="?after=100">Next page`} {
		if !strings.Contains(body, want) {
			t.Errorf("the pool's page lacks %q:\n%s", want, body)
		}
	}
	if w := do(h, "GET", "/console/env/prod/pools/nope", "reader", nil); w.Code != 404 {
		t.Errorf("an unknown pool = %d, want the API's 404", w.Code)
	}
}
