package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
)

// sseEvent is one server-sent event as a test reads it.
type sseEvent struct {
	id, name string
	data     client.TransferEvent
}

// sseStream is an open event stream: events arrive on events, which is
// closed when the stream ends (err then says how).
type sseStream struct {
	resp   *http.Response
	events chan sseEvent
	err    error
}

// openEvents opens an instance's event stream with token (""): none),
// query and extra headers; a status other than 200 is returned with the
// body read.
func openEvents(t *testing.T, c *client.Client, env, token, ref, query string, header http.Header) (*sseStream, int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.Base+"/lsm/v1/service_inventory/vm/"+ref+"/events"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.EnvironmentHeader, env)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, resp.StatusCode, b
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type = %q", ct)
	}
	s := &sseStream{resp: resp, events: make(chan sseEvent, 100)}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		var data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != "" {
					if err := json.Unmarshal([]byte(data), &ev.data); err != nil {
						s.err = err
						return
					}
					s.events <- ev
				}
				ev, data = sseEvent{}, ""
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
		s.err = sc.Err()
	}()
	return s, http.StatusOK, nil
}

// next returns the next event, failing the test after a minute or when
// the stream ends.
func (s *sseStream) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatalf("the stream ended (%v)", s.err)
		}
		return ev
	case <-time.After(90 * time.Second):
		t.Fatal("no event for 90 s")
	}
	return sseEvent{}
}

// until reads events until one at state, returning them all.
func (s *sseStream) until(t *testing.T, state string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev := s.next(t)
		out = append(out, ev)
		if ev.data.Target == state {
			return out
		}
	}
}

// ended checks that the stream ends (cleanly) within 10 s with no more
// events.
func (s *sseStream) ended(t *testing.T) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			t.Fatalf("an event after the end: %+v", ev)
		}
		if s.err != nil {
			t.Fatalf("the stream broke: %v", s.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
}

// TestInstanceEventStream: a stream opened on a new instance delivers
// every version in order through create → up → update → up → delete, for
// longer than the server's write timeout, and ends at terminated; a
// reconnect with Last-Event-ID gets exactly the versions it missed; the
// default start is the current version; a read token may stream, no
// token may not; bad starts are 422.
func TestInstanceEventStream(t *testing.T) {
	const writeTimeout = 2 * time.Second
	c, _, _ := startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, WriteTimeout: writeTimeout,
	})
	env := newEnv(t, c, "lsmevents", nil)
	if err := uploadModel(t, c, env, lsmFileModel(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	const inventory = "/lsm/v1/service_inventory/vm"
	r := lsmDo(t, c, env, http.MethodPost, inventory, "", map[string]any{"attributes": map[string]any{"name": "web"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	id := r.instance(t).ID

	// Bad starts, and who may stream.
	for _, bad := range []struct{ why, query, lastID, field string }{
		{"a negative after", "?after=-1", "", "?after"},
		{"an after that is not a number", "?after=abc", "", "?after"},
		{"an after out of range", "?after=99999999999999999999", "", "?after"},
		{"a Last-Event-ID that is not a version", "", "x1", "Last-Event-ID"},
	} {
		h := http.Header{}
		if bad.lastID != "" {
			h.Set("Last-Event-ID", bad.lastID)
		}
		_, status, body := openEvents(t, c, env, c.Token, id, bad.query, h)
		var p client.Problem
		if json.Unmarshal(body, &p) != nil || status != 422 || !hasFieldError(p, bad.field, "") {
			t.Errorf("%s: %d %s", bad.why, status, body)
		}
	}
	if _, status, _ := openEvents(t, c, env, "", id, "", nil); status != http.StatusUnauthorized {
		t.Errorf("no token: %d", status)
	}
	reader := mint(t, c, "events-reader", "read", env)

	// The whole life, as a read token sees it.
	st, status, body := openEvents(t, c, env, reader, id, "?after=0", nil)
	if status != http.StatusOK {
		t.Fatalf("stream as a reader: %d %s", status, body)
	}
	connected := time.Now()
	var got []sseEvent
	got = append(got, st.until(t, "up")...)
	// Outlive the server's write timeout before the next transfer: a
	// stream the timeout cut would deliver nothing more.
	time.Sleep(time.Until(connected.Add(2 * writeTimeout)))
	up := got[len(got)-1].data.Version
	r = lsmDo(t, c, env, http.MethodPatch, inventory+"/web", "", map[string]any{"current_version": up,
		"attributes": map[string]any{"memory": 4}})
	if r.status != 200 {
		t.Fatalf("update: %d %s", r.status, r.body)
	}
	updated := st.until(t, "update_start")
	got = append(got, updated...)
	if ev := updated[len(updated)-1]; ev.data.Trigger != "on_update" || ev.data.Actor == "" ||
		ev.data.Candidate["memory"] != 4.0 {
		t.Errorf("the update's event = %+v", ev.data)
	}
	got = append(got, st.until(t, "up")...)
	last := got[len(got)-1]
	if last.data.Deployment == nil || last.data.Deployment.Total != 1 {
		t.Errorf("the newest event's deployment = %+v", last.data.Deployment)
	}
	r = lsmDo(t, c, env, http.MethodDelete, inventory+"/web?current_version="+strconv.FormatInt(last.data.Version, 10), "", nil)
	if r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	got = append(got, st.until(t, "terminated")...)
	st.ended(t)
	for i, ev := range got {
		if want := int64(i + 1); ev.data.Version != want || ev.id != strconv.FormatInt(want, 10) ||
			ev.name != api.TransferEventName || ev.data.InstanceID != id {
			t.Fatalf("event %d = %+v, want version %d in order", i, ev, want)
		}
		if ev.data.Terminal != (i == len(got)-1) {
			t.Errorf("event %d (%s) terminal = %v", i, ev.data.Target, ev.data.Terminal)
		}
	}
	if got[0].data.Trigger != "create" || got[0].data.Target != "start" || got[1].data.Source != "start" {
		t.Errorf("the first events = %+v, %+v", got[0].data, got[1].data)
	}
	var inst struct{ Version int64 }
	if err := lsmGet(t, c, env, inventory+"/"+id, &inst); err != nil || inst.Version != int64(len(got)) {
		t.Fatalf("instance version %d, %d events (%v)", inst.Version, len(got), err)
	}

	// A reconnect that saw version 3 gets 4 on, exactly, and the end.
	st, status, body = openEvents(t, c, env, c.Token, id, "?after=1", http.Header{"Last-Event-Id": {"3"}})
	if status != http.StatusOK {
		t.Fatalf("reconnect: %d %s", status, body)
	}
	again := st.until(t, "terminated")
	st.ended(t)
	if len(again) != len(got)-3 || again[0].data.Version != 4 {
		t.Errorf("reconnect after 3: %d events from %+v, want %d from 4", len(again), again[0].data, len(got)-3)
	}
	// No start given: the current version, as a snapshot, and (it is
	// terminal) the end.
	st, status, _ = openEvents(t, c, env, c.Token, id, "", nil)
	if status != http.StatusOK {
		t.Fatalf("snapshot: %d", status)
	}
	if ev := st.next(t); ev.data.Version != inst.Version || !ev.data.Terminal {
		t.Errorf("snapshot = %+v", ev.data)
	}
	st.ended(t)
}
