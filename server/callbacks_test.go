package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
)

// delivery is one request a receiver got.
type delivery struct {
	path     string
	eventID  string
	attempt  string
	event    callbacks.Event
	verified error
	at       time.Time
}

// receiver is a callback receiver on a fixed port that can fail, be
// slow, and be stopped and started again. It records every request on
// arrival.
type receiver struct {
	t       *testing.T
	addr    string
	secrets map[string]string // by path
	mu      sync.Mutex
	got     []delivery
	// fail answers 500 to the next fail requests; slow makes the next
	// slow requests sleep for sleep before answering.
	fail, slow int
	sleep      time.Duration
	srv        *http.Server
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, secrets: map[string]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *receiver) url(path string) string { return "http://" + r.addr + path }

func (r *receiver) serve(ln net.Listener) {
	r.srv = &http.Server{Handler: http.HandlerFunc(r.handle)}
	go r.srv.Serve(ln)
}

// stop closes the port: deliveries meet a refused connection.
func (r *receiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// start listens on the same port again.
func (r *receiver) start() {
	var ln net.Listener
	wait.For(r.t, "a listener on "+r.addr+" again", 10*time.Second, func() (err error) {
		ln, err = net.Listen("tcp", r.addr)
		return err
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.serve(ln)
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{path: req.URL.Path, eventID: req.Header.Get(callbacks.EventIDHeader),
		attempt: req.Header.Get(callbacks.AttemptHeader), at: time.Now()}
	r.mu.Lock()
	d.verified = callbacks.Verify(r.secrets[req.URL.Path], req.Header, body, time.Now(), 0)
	if err := json.Unmarshal(body, &d.event); err != nil {
		d.verified = err
	}
	r.got = append(r.got, d)
	fail, slow := r.fail > 0, r.slow > 0 && r.fail == 0
	if fail {
		r.fail--
	}
	if slow {
		r.slow--
	}
	sleep := r.sleep
	r.mu.Unlock()
	switch {
	case fail:
		http.Error(w, "not now", http.StatusInternalServerError)
	case slow:
		time.Sleep(sleep)
	}
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// raw sends body as is to the /lsm API with token.
func lsmRaw(t *testing.T, c *client.Client, token, env, method, path, body string) lsmReply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.EnvironmentHeader, env)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return lsmReply{status: resp.StatusCode, header: resp.Header, body: b}
}

// callbackModel is lsmFileModel with a second entity, db, without
// resources.
func callbackModel(root string) string {
	return lsmFileModel(root) + `
#DB: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: {
		name: =~"^[a-z]+$" @lsm(rw)
	}
	output: {}
}

services: db: #DB
`
}

func listCallbacks(t *testing.T, c *client.Client, env string) []client.Callback {
	t.Helper()
	var page struct {
		Items []client.Callback `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/callbacks", &page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// TestCallbacks: three instances go create → up → update → up → delete
// → terminated while their callback's receiver answers 500 to the first
// deliveries, is slow past the timeout once, and is stopped (port
// closed) for a while and started again on the same port. Every transfer
// of every instance arrives at least once, the first deliveries of an
// instance in version order, signed, and a repeat carries the event's
// id. An entity-scoped callback gets only its entity's events; a
// deleted one gets nothing more; a healthy receiver hears of a transfer
// within about a second.
func TestCallbacks(t *testing.T) {
	c, _, _ := startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
		Callbacks: server.CallbackOptions{Timeout: time.Second, MinBackoff: 100 * time.Millisecond,
			MaxBackoff: time.Second, Poll: time.Second},
	})
	env := newEnv(t, c, "callbacks", nil)
	root := t.TempDir()
	if err := uploadModel(t, c, env, callbackModel(root)); err != nil {
		t.Fatal(err)
	}
	rcv := newReceiver(t)
	register := func(path string, body map[string]any) client.Callback {
		t.Helper()
		body["url"] = rcv.url(path)
		r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/callbacks", "", body)
		var cb client.CreatedCallback
		if r.status != http.StatusCreated || json.Unmarshal(r.body, &cb) != nil || len(cb.Secret) != 64 ||
			r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("register %s: %d %s", path, r.status, r.body)
		}
		rcv.mu.Lock()
		rcv.secrets[path] = cb.Secret
		rcv.mu.Unlock()
		return cb.Callback
	}
	all := register("/all", map[string]any{"description": "every entity"})
	vmOnly := register("/vm", map[string]any{"service_entity": "vm"})
	if all.ServiceEntity != "" || vmOnly.ServiceEntity != "vm" {
		t.Fatalf("registered %+v and %+v", all, vmOnly)
	}
	// No secret in a list or a read.
	r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/callbacks", "", nil)
	if r.status != http.StatusOK || strings.Contains(string(r.body), rcv.secrets["/all"]) || strings.Contains(string(r.body), `"secret"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}

	// The first deliveries fail; then one is slow past the timeout.
	rcv.mu.Lock()
	rcv.fail, rcv.slow, rcv.sleep = 4, 1, 1500*time.Millisecond
	rcv.mu.Unlock()

	const inventory = "/lsm/v1/service_inventory/"
	names := []string{"web", "api", "db"}
	ids := map[string]string{}
	for _, n := range names {
		r := lsmDo(t, c, env, http.MethodPost, inventory+"vm", "", map[string]any{"attributes": map[string]any{"name": n}})
		if r.status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", n, r.status, r.body)
		}
		ids[n] = r.instance(t).ID
	}
	r = lsmDo(t, c, env, http.MethodPost, inventory+"db", "", map[string]any{"attributes": map[string]any{"name": "main"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create db: %d %s", r.status, r.body)
	}
	dbID := r.instance(t).ID
	for _, n := range names {
		inst := waitState(t, c, env, n, "up", "rejected", "failed")
		r := lsmDo(t, c, env, http.MethodPatch, inventory+"vm/"+n, "",
			map[string]any{"current_version": inst.Version, "attributes": map[string]any{"memory": 4}})
		if r.status != http.StatusOK {
			t.Fatalf("update %s: %d %s", n, r.status, r.body)
		}
	}
	// The receiver goes away while the instances are deleted.
	var ups []client.ServiceInstance
	for _, n := range names {
		ups = append(ups, waitState(t, c, env, n, "up", "update_rejected", "update_failed"))
	}
	rcv.stop()
	for i, n := range names {
		r := lsmDo(t, c, env, http.MethodDelete, fmt.Sprintf("%svm/%s?current_version=%d", inventory, n, ups[i].Version), "", nil)
		if r.status != http.StatusOK {
			t.Fatalf("delete %s: %d %s", n, r.status, r.body)
		}
	}
	for _, n := range names {
		wait.For(t, n+" to be terminated", 90*time.Second, func() error {
			var inst client.ServiceInstance
			err := lsmGet(t, c, env, inventory+"vm/"+ids[n], &inst)
			return wait.Unless(inst.State == "terminated", "%+v, %v", inst, err)
		})
	}
	// Deliveries fail with the port closed, and the API says so.
	wait.For(t, "deliveries to fail with the port closed", 60*time.Second, func() error {
		cbs := listCallbacks(t, c, env)
		return wait.Unless(len(cbs) == 2 && cbs[0].Stats.Pending > 0 && strings.Contains(cbs[0].Stats.LastError, "refused"), "%+v", cbs)
	})
	rcv.start()

	// Every transfer arrives.
	logs := map[string][]client.InstanceLogEntry{}
	for _, id := range append([]string{dbID}, ids["web"], ids["api"], ids["db"]) {
		logs[id] = instanceLog(t, c, env, id)
	}
	want := 0
	for id, l := range logs {
		want += len(l)
		if id != dbID {
			want += len(l) // and the vm callback's
		}
	}
	wait.For(t, "every transfer to be delivered", 60*time.Second, func() error {
		cbs := listCallbacks(t, c, env)
		n := 0
		for _, cb := range cbs {
			if cb.Stats.Pending > 0 || cb.Stats.Dead > 0 {
				return fmt.Errorf("%+v", cbs)
			}
			n += cb.Stats.Delivered
		}
		return wait.Unless(n == want, "%d of %d delivered: %+v", n, want, cbs)
	})

	got := rcv.deliveries()
	failed, slowed, repeats := 0, 0, 0
	type key struct {
		path, instance string
		version        int64
	}
	first := map[key]delivery{}
	last := map[[2]string]int64{} // (path, instance): the version first delivered last
	for _, d := range got {
		if d.verified != nil {
			t.Errorf("delivery %s to %s: %v", d.eventID, d.path, d.verified)
			continue
		}
		if d.attempt != "1" {
			repeats++
		}
		if d.event.EventID != d.eventID || d.event.Environment == "" || d.event.EnvironmentName != env {
			t.Errorf("event %+v under id %s", d.event, d.eventID)
		}
		k := key{d.path, d.event.InstanceID, d.event.Version}
		if f, ok := first[k]; ok {
			if f.eventID != d.eventID {
				t.Errorf("%v delivered as %s and %s", k, f.eventID, d.eventID)
			}
			continue
		}
		first[k] = d
		pk := [2]string{d.path, d.event.InstanceID}
		if d.event.Version != last[pk]+1 {
			t.Errorf("%s: version %d of %s delivered first after %d", d.path, d.event.Version, d.event.InstanceID, last[pk])
		}
		last[pk] = d.event.Version
		if d.path == "/vm" && d.event.ServiceEntity != "vm" {
			t.Errorf("the vm callback got %+v", d.event)
		}
	}
	rcv.mu.Lock()
	failed, slowed = 4-rcv.fail, 1-rcv.slow
	rcv.mu.Unlock()
	t.Logf("%d deliveries of %d events: %d failed, %d slow, %d repeated", len(got), want, failed, slowed, repeats)
	if failed != 4 || slowed != 1 || repeats < 5 {
		t.Errorf("%d deliveries failed, %d slow, %d repeated", failed, slowed, repeats)
	}
	for id, l := range logs {
		paths := []string{"/all", "/vm"}
		if id == dbID {
			paths = paths[:1]
			if _, ok := first[key{"/vm", id, 1}]; ok {
				t.Errorf("the vm callback got the db instance's events")
			}
		}
		for _, p := range paths {
			for _, e := range l {
				d, ok := first[key{p, id, e.Version}]
				if !ok {
					t.Errorf("%s: version %d of %s never arrived", p, e.Version, id)
					continue
				}
				if d.event.TargetState != e.State || d.event.Time.IsZero() {
					t.Errorf("%s: version %d is %+v, the log says %s", p, e.Version, d.event, e.State)
				}
			}
		}
	}
	if ev := first[key{"/all", ids["web"], 1}].event; ev.Trigger != "create" || ev.Actor != "token:bootstrap" ||
		ev.ServiceEntity != "vm" || ev.Identity != "web" || ev.SourceState != "" {
		t.Errorf("web's create: %+v", ev)
	}
	if ev := first[key{"/all", ids["web"], 2}].event; ev.Trigger != "auto" || ev.SourceState != "start" || ev.Actor != store.SystemActor {
		t.Errorf("web's validation: %+v", ev)
	}

	// Deleting the vm callback stops its deliveries; a healthy receiver
	// hears of a transfer within about a second.
	r = lsmDo(t, c, env, http.MethodDelete, "/lsm/v1/callbacks/"+vmOnly.ID, "", nil)
	if r.status != http.StatusOK {
		t.Fatalf("delete callback: %d %s", r.status, r.body)
	}
	if r := lsmDo(t, c, env, http.MethodGet, "/lsm/v1/callbacks/"+vmOnly.ID, "", nil); r.status != http.StatusNotFound {
		t.Errorf("deleted callback: %d %s", r.status, r.body)
	}
	r = lsmDo(t, c, env, http.MethodPost, inventory+"vm", "", map[string]any{"attributes": map[string]any{"name": "late"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create late: %d %s", r.status, r.body)
	}
	late := r.instance(t)
	waitState(t, c, env, "late", "up", "rejected", "failed")
	wait.For(t, "the callback to have nothing pending", 60*time.Second, func() error {
		cbs := listCallbacks(t, c, env)
		return wait.Unless(len(cbs) == 1 && cbs[0].Stats.Pending == 0, "%+v", cbs)
	})
	for _, d := range rcv.deliveries() {
		if d.event.InstanceID != late.ID {
			continue
		}
		if d.path != "/all" {
			t.Errorf("the deleted callback got %+v", d.event)
		}
		if lag := d.at.Sub(d.event.Time); d.attempt == "1" && lag > 1500*time.Millisecond {
			t.Errorf("version %d arrived %s after its transfer", d.event.Version, lag)
		}
	}
}

// instanceLog is an instance's log.
func instanceLog(t *testing.T, c *client.Client, env, id string) []client.InstanceLogEntry {
	t.Helper()
	var entity string
	for _, e := range []string{"vm", "db"} {
		var inst client.ServiceInstance
		if lsmGet(t, c, env, "/lsm/v1/service_inventory/"+e+"/"+id, &inst) == nil {
			entity = e
		}
	}
	var page struct {
		Items []client.InstanceLogEntry `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_inventory/"+entity+"/"+id+"/log", &page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

// TestCallbackRegistration: the registration refuses bad input with a
// problem and writes nothing; a read token cannot register or delete;
// a callback is the environment's own.
func TestCallbackRegistration(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "cbreg", nil)
	other := newEnv(t, c, "cbreg2", nil)
	if err := uploadModel(t, c, env, callbackModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	const path = "/lsm/v1/callbacks"
	long := "http://example.com/" + strings.Repeat("a", 2048)
	for _, tc := range []struct {
		why, body string
		status    int
		field     string
	}{
		{"malformed JSON", `{"url": `, 400, ""},
		{"not an object", `["http://example.com/"]`, 422, ""},
		{"unknown field", `{"url": "http://example.com/", "secret": "mine"}`, 422, "/secret"},
		{"url of the wrong type", `{"url": 5}`, 422, "/url"},
		{"no url", `{}`, 422, "/url"},
		{"too long a url", `{"url": "` + long + `"}`, 422, "/url"},
		{"not http", `{"url": "file:///etc/passwd"}`, 422, "/url"},
		{"gopher", `{"url": "gopher://example.com/"}`, 422, "/url"},
		{"relative", `{"url": "/hook"}`, 422, "/url"},
		{"no host", `{"url": "http:///hook"}`, 422, "/url"},
		{"credentials in the url", `{"url": "https://user:pw@example.com/hook"}`, 422, "/url"},
		{"a fragment", `{"url": "https://example.com/hook#x"}`, 422, "/url"},
		{"spaces", `{"url": "https://example.com/a hook"}`, 422, "/url"},
		{"an unknown entity", `{"url": "https://example.com/", "service_entity": "nope"}`, 422, "/service_entity"},
		{"an empty entity", `{"url": "https://example.com/", "service_entity": ""}`, 422, "/service_entity"},
		{"an entity of the wrong type", `{"url": "https://example.com/", "service_entity": 3}`, 422, "/service_entity"},
		{"too long a description", `{"url": "https://example.com/", "description": "` + strings.Repeat("d", 1025) + `"}`, 422, "/description"},
		{"a description with control characters", `{"url": "https://example.com/", "description": "a\u0007b"}`, 422, "/description"},
	} {
		r := lsmRaw(t, c, c.Token, env, http.MethodPost, path, tc.body)
		if r.status != tc.status || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s", tc.why, r.status, r.body)
			continue
		}
		if p := r.problem(t); tc.field != "" && !hasFieldError(p, tc.field, "") {
			t.Errorf("%s: no error for %s in %s", tc.why, tc.field, r.body)
		}
	}
	// No environment header: 400.
	if r := lsmRaw(t, c, c.Token, "", http.MethodPost, path, `{"url": "https://example.com/"}`); r.status != http.StatusBadRequest {
		t.Errorf("no environment: %d %s", r.status, r.body)
	}
	if cbs := listCallbacks(t, c, env); len(cbs) != 0 {
		t.Fatalf("bad input registered %+v", cbs)
	}

	// A read token lists but cannot register or delete; an operator
	// cannot register either.
	reader := mint(t, c, "cbreader", "read", env)
	operator := mint(t, c, "cboperator", "operator", env)
	for _, tok := range []string{reader, operator} {
		if r := lsmRaw(t, c, tok, env, http.MethodPost, path, `{"url": "https://example.com/"}`); r.status != http.StatusForbidden {
			t.Errorf("register without admin: %d %s", r.status, r.body)
		}
	}
	if cbs := listCallbacks(t, c, env); len(cbs) != 0 {
		t.Fatalf("a reader registered %+v", cbs)
	}
	r := lsmRaw(t, c, c.Token, env, http.MethodPost, path, `{"url": "https://example.com/hook?x=1", "service_entity": "vm"}`)
	var cb client.CreatedCallback
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &cb) != nil || r.header.Get("Location") != path+"/"+cb.ID {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	if r := lsmRaw(t, c, reader, env, http.MethodGet, path, ""); r.status != http.StatusOK || !strings.Contains(string(r.body), cb.ID) {
		t.Errorf("a reader lists: %d %s", r.status, r.body)
	}
	if r := lsmRaw(t, c, reader, env, http.MethodGet, path+"/"+cb.ID, ""); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"dead_events":[]`) || strings.Contains(string(r.body), cb.Secret) {
		t.Errorf("a reader reads: %d %s", r.status, r.body)
	}
	if r := lsmRaw(t, c, reader, env, http.MethodDelete, path+"/"+cb.ID, ""); r.status != http.StatusForbidden {
		t.Errorf("a reader deletes: %d %s", r.status, r.body)
	}
	// Another environment does not see it; a bad id is 404.
	for _, tc := range []struct{ env, id string }{{other, cb.ID}, {env, "nope"}, {env, "00000000-0000-4000-8000-000000000000"}} {
		if r := lsmRaw(t, c, c.Token, tc.env, http.MethodGet, path+"/"+tc.id, ""); r.status != http.StatusNotFound {
			t.Errorf("GET %s in %s: %d %s", tc.id, tc.env, r.status, r.body)
		}
		if r := lsmRaw(t, c, c.Token, tc.env, http.MethodDelete, path+"/"+tc.id, ""); r.status != http.StatusNotFound {
			t.Errorf("DELETE %s in %s: %d %s", tc.id, tc.env, r.status, r.body)
		}
	}
	if cbs := listCallbacks(t, c, env); len(cbs) != 1 {
		t.Fatalf("after refused deletes: %+v", cbs)
	}
	if r := lsmRaw(t, c, c.Token, env, http.MethodDelete, path+"/"+cb.ID, ""); r.status != http.StatusOK {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if cbs := listCallbacks(t, c, env); len(cbs) != 0 {
		t.Fatalf("after delete: %+v", cbs)
	}
}

// TestCallbackGivesUp: a receiver that always refuses gets each event a
// bounded number of times; the events are then dead, shown by the API
// with their last error, and the instance's next events go on (in
// order). The server sends callbacks to --lsm-callback-hosts only.
func TestCallbackGivesUp(t *testing.T) {
	c, _, _ := startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second,
		Callbacks: server.CallbackOptions{Timeout: time.Second, MinBackoff: 50 * time.Millisecond,
			MaxBackoff: 100 * time.Millisecond, MaxAttempts: 2, AllowedHosts: []string{"127.0.0.1"}},
	})
	env := newEnv(t, c, "cbdead", nil)
	if err := uploadModel(t, c, env, callbackModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	// Only the allowed hosts.
	r := lsmDo(t, c, env, http.MethodPost, "/lsm/v1/callbacks", "", map[string]any{"url": "http://localhost:1/"})
	if r.status != http.StatusUnprocessableEntity || !hasFieldError(r.problem(t), "/url", "lsm-callback-hosts") {
		t.Errorf("a host not allowed: %d %s", r.status, r.body)
	}
	rcv := newReceiver(t)
	rcv.mu.Lock()
	rcv.fail = 1 << 30
	rcv.mu.Unlock()
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/callbacks", "", map[string]any{"url": rcv.url("/down")})
	var cb client.CreatedCallback
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &cb) != nil {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	rcv.mu.Lock()
	rcv.secrets["/down"] = cb.Secret
	rcv.mu.Unlock()
	r = lsmDo(t, c, env, http.MethodPost, "/lsm/v1/service_inventory/db", "", map[string]any{"attributes": map[string]any{"name": "main"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.instance(t).ID
	var view client.CallbackView
	wait.For(t, "four dead events of callback "+cb.ID, 60*time.Second, func() error {
		view = client.CallbackView{}
		err := lsmGet(t, c, env, "/lsm/v1/callbacks/"+cb.ID, &view)
		return wait.Unless(err == nil && view.Stats.Dead == 4 && view.Stats.Pending == 0, "%+v, %v", view, err)
	})
	if len(view.DeadEvents) != 4 || view.Stats.Delivered != 0 || !strings.HasPrefix(view.Stats.LastError, "HTTP 500: not now") {
		t.Errorf("callback %+v", view)
	}
	for _, e := range view.DeadEvents {
		if e.Attempts != 2 || e.LastStatus == nil || *e.LastStatus != 500 || e.InstanceID != id {
			t.Errorf("dead event %+v", e)
		}
	}
	// Two attempts each, in version order.
	got := rcv.deliveries()
	if len(got) != 8 {
		t.Fatalf("%d deliveries, want 8", len(got))
	}
	for i, d := range got {
		if d.verified != nil || d.event.Version != int64(i/2+1) || d.attempt != strconv.Itoa(i%2+1) {
			t.Errorf("delivery %d: version %d attempt %s: %v", i, d.event.Version, d.attempt, d.verified)
		}
	}
}
