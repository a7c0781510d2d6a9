package main

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestNotificationsCommand: intend notifications lists an environment's
// notifications (bare and as list, table and --json), read and clear
// mark them (by id or --all), and neither ids nor --all is a usage
// error.
func TestNotificationsCommand(t *testing.T) {
	// Not parallel: see TestCLIAgainstServer.
	c, _, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	env := servertest.NewEnvironment(t, c, "clinotify", map[string]any{"autostart_agents": []string{},
		"agent_timeout": 1, "deploy_interval": 0})
	path := filepath.Join(t.TempDir(), "f")
	v, err := c.ExportVersion(ctx, env, []byte(`{"resources":[{"id":"fs::File[lonely,path=`+path+`]",
		"attributes":{"path":"`+path+`","content":"x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "versions", "1", "release"), nil, nil); err != nil || v.Version != 1 {
		t.Fatalf("release: %v", err)
	}
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token, "INTEND_ENVIRONMENT": env}
	var listed []client.Notification
	wait.For(t, "a notification of agent lonely", 60*time.Second, func() error {
		jsonOf(t, ok(t, vars, "notifications", "list", "--json"), &listed)
		return wait.Unless(len(listed) > 0, "none listed")
	})
	n := listed[0]
	if len(listed) != 1 || n.Kind != "agent_without_executor" || n.Agent != "lonely" {
		t.Fatalf("notifications = %+v", listed)
	}
	if row := rowOf(t, ok(t, vars, "notifications"), n.ID); row[len(row)-1] != "unread" {
		t.Errorf("bare notifications row %v, want it unread", row)
	}
	if row := rowOf(t, ok(t, vars, "notifications", "list", "-o", "wide"), n.ID); len(row) < 8 {
		t.Errorf("wide row %v", row)
	}

	var marked []client.Notification
	jsonOf(t, ok(t, vars, "notifications", "read", "--all", "--json"), &marked)
	if len(marked) != 1 || marked[0].ID != n.ID || marked[0].ReadAt == nil {
		t.Errorf("read --all = %+v", marked)
	}
	jsonOf(t, ok(t, vars, "notifications", "list", "--unread", "--json"), &listed)
	if len(listed) != 0 {
		t.Errorf("unread after read --all: %+v", listed)
	}
	ok(t, vars, "notifications", "clear", n.ID)
	jsonOf(t, ok(t, vars, "notifications", "--json"), &listed)
	if len(listed) != 0 {
		t.Errorf("list after clear: %+v", listed)
	}
	jsonOf(t, ok(t, vars, "notifications", "list", "--cleared", "--json"), &listed)
	if len(listed) != 1 || listed[0].ClearedAt == nil {
		t.Errorf("list --cleared: %+v", listed)
	}
	fails(t, vars, exitUsage, []string{"name the notifications to read, or --all"}, "notifications", "read")
	fails(t, vars, exitUsage, []string{"name the notifications to clear, or --all"}, "notifications", "clear", n.ID, "--all")
	fails(t, vars, exitFailed, []string{"Not found (404)"}, "notifications", "read", "00000000-0000-0000-0000-000000000001")
}
