package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/internal/testenv/wait"
)

// TestLSMCallbackCommands: intend lsm callback add registers a URL and
// prints its secret once; the receiver gets the transfers of a create,
// signed with that secret; list and show count them; delete removes
// it; bad input is refused by name.
func TestLSMCallbackCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	vars, _ := lsmServer(t, "lsmcb")
	model := `package main

import "intend.dev/std/lsm"

#VM: lsm.#Entity & {
	lifecycle: lsm.simple
	identity:  "name"
	parameter: name: =~"^[a-z]+$" @lsm(rw)
	output: {}
}

services: vm: #VM
`
	writeProject(t, vars, "lsmcb", model)

	var mu sync.Mutex
	var secret string
	got := map[string]error{} // event id: its signature's check
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got[r.Header.Get(callbacks.EventIDHeader)] = callbacks.Verify(secret, r.Header, body, time.Now(), 0)
	}))
	defer rcv.Close()

	fails(t, vars, 1, []string{"/url", "http or https"}, "lsm", "callback", "add", "ftp://example.com/")
	fails(t, vars, 1, []string{"/service_entity"}, "lsm", "callback", "add", rcv.URL, "--entity", "nope")
	fails(t, vars, 2, []string{"accepts 1 arg"}, "lsm", "callback", "add")
	out := ok(t, vars, "lsm", "callback", "add", rcv.URL+"/hook", "--entity", "vm", "--description", "sync")
	id := field(t, out, "id")
	mu.Lock()
	secret = field(t, out, "secret")
	mu.Unlock()
	if len(id) != 36 || len(secret) != 64 || field(t, out, "entity") != "vm" || !strings.Contains(out, "shown this once") {
		t.Fatalf("add:\n%s", out)
	}

	ok(t, vars, "lsm", "create", "vm", "--attr", "name=web", "--wait", "up")
	wait.For(t, "the callback's four deliveries to be listed", 60*time.Second, func() error {
		out = ok(t, vars, "lsm", "callback", "list")
		row := rowOf(t, out, id)
		// ID ENTITY URL PENDING DELIVERED DEAD ...
		return wait.Unless(row[1] == "vm" && row[2] == rcv.URL+"/hook" && row[3] == "0" && row[4] == "4" && row[5] == "0",
			"list after the create:\n%s", out)
	})
	mu.Lock()
	if len(got) != 4 {
		t.Errorf("received %d events, want 4 (start, acknowledged, creating, up)", len(got))
	}
	for ev, err := range got {
		if err != nil {
			t.Errorf("event %s: %v", ev, err)
		}
	}
	mu.Unlock()
	out = ok(t, vars, "lsm", "callback", "show", id)
	if field(t, out, "delivered") != "4" || field(t, out, "description") != "sync" || strings.Contains(out, secret) {
		t.Errorf("show:\n%s", out)
	}
	if out = ok(t, vars, "lsm", "callback", "list", "--json"); strings.Contains(out, secret) || !strings.Contains(out, id) {
		t.Errorf("list --json:\n%s", out)
	}

	out = ok(t, vars, "lsm", "callback", "delete", id)
	if !strings.Contains(out, "deleted callback "+id) {
		t.Errorf("delete:\n%s", out)
	}
	if out = ok(t, vars, "lsm", "callback", "list"); strings.Contains(out, id) {
		t.Errorf("list after delete:\n%s", out)
	}
	fails(t, vars, 1, []string{"404"}, "lsm", "callback", "delete", id)
}

// TestCallbackHostsFlag: --lsm-callback-hosts takes host names only;
// the callback commands have help.
func TestCallbackHostsFlag(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"lsm", "callback"}, {"lsm", "callback", "add"}, {"lsm", "callback", "list"},
		{"lsm", "callback", "show"}, {"lsm", "callback", "delete"}} {
		out, err := runCmd(t, append(cmd, "--help")...)
		if err != nil || !strings.Contains(out, "Usage:") || !strings.Contains(out, "callback") {
			t.Errorf("intend %v --help: %v\n%s", cmd, err, out)
		}
	}
	for _, bad := range []string{"https://hooks.example.com", "hooks.example.com/x", "user@host"} {
		_, err := runCmd(t, "server", "--lsm-callback-hosts", bad)
		if err == nil || !strings.Contains(err.Error(), "--lsm-callback-hosts") || exitCode(err) != exitUsage {
			t.Errorf("--lsm-callback-hosts %s: %v", bad, err)
		}
	}
}
