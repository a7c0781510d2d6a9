package main

import (
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestFactsCommand: intend facts set stores a user-set fact (a parameter)
// by a resource id with slashes, facts list shows it with its source,
// a VALUE that is not JSON is refused before any request, and facts rm
// removes it (a second rm is not found).
func TestFactsCommand(t *testing.T) {
	c, _, _ := servertest.StartServer(t, server.Config{ReconcileEvery: time.Second, SchedulerPoll: time.Second})
	envName := testenv.UniqueName(t, "facts")
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	withEnv := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": envName}
	ok(t, vars, "env", "create", envName, "--project", "p-"+envName)
	rid := "fs::File[web1,path=/etc/app/motd]"

	out := ok(t, withEnv, "facts", "set", rid, "owner", `"team-a"`)
	if !strings.Contains(out, "fact owner of "+rid+" set (source user)") {
		t.Errorf("facts set: %s", out)
	}
	ok(t, withEnv, "facts", "set", rid, "limits", `{"max": 3}`)
	if row := rowOf(t, ok(t, withEnv, "facts", "list"), rid); len(row) < 4 || row[1] != "limits" || row[2] != "user" {
		t.Errorf("facts list row %v, want limits, user", row)
	}
	var facts []map[string]any
	jsonOf(t, ok(t, withEnv, "facts", "list", rid, "--json"), &facts)
	if len(facts) != 2 || facts[1]["name"] != "owner" || facts[1]["value"] != "team-a" || facts[1]["source"] != "user" {
		t.Errorf("facts list --json = %v", facts)
	}
	fails(t, withEnv, exitFailed, []string{"not JSON"}, "facts", "set", rid, "owner", "team-a")
	out = ok(t, withEnv, "facts", "rm", rid, "owner")
	if !strings.Contains(out, "fact owner of "+rid+" removed") {
		t.Errorf("facts rm: %s", out)
	}
	fails(t, withEnv, exitFailed, []string{"Not found (404)"}, "facts", "rm", rid, "owner")
	jsonOf(t, ok(t, withEnv, "facts", "list", "--json"), &facts)
	if len(facts) != 1 || facts[0]["name"] != "limits" {
		t.Errorf("facts after rm = %v, want limits alone", facts)
	}
}
