package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleRedactsSensitiveOutputs: the console shows what the API
// shows its user. Signed in with a read token, the resource page's action
// log shows an exec::Command's output as the redaction marker, and a
// dry-run's page an fs::File's content the same way, with no diff; signed
// in as an author, both are there.
func TestConsoleRedactsSensitiveOutputs(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	env := servertest.NewEnvironment(t, c, "redact", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := t.TempDir()
	const minted = "intend_minted-for-the-console-test-0123456789"
	if err := os.WriteFile(filepath.Join(dir, "minted"), []byte(minted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shadow := filepath.Join(dir, "shadow")
	if err := os.WriteFile(shadow, []byte("root:$6$salt$the-shadow-hash:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := map[string]any{"id": "exec::Command[localhost,name=mint]", "attributes": map[string]any{
		"name": "mint", "command": "cat minted; touch made", "cwd": dir, "creates": filepath.Join(dir, "made")}}
	b, _ := json.Marshal(map[string]any{"resources": []any{cmd}})
	if _, err := c.WaitRequest(ctx, env, servertest.Release(t, c, env, b), time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	f := map[string]any{"id": "fs::File[localhost,path=" + shadow + "]", "attributes": map[string]any{
		"path": shadow, "content": "root:x:19000::::::\n", "mode": "0600"}}
	b, _ = json.Marshal(map[string]any{"resources": []any{cmd, f}})
	v, err := c.ExportVersion(ctx, env, b)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := c.RequestDryrun(ctx, env, client.DryrunRequest{Version: v.Version})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		var run client.DeployRun
		if err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/environments/%s/dryrun/%d", env, dr.Run), nil, &run); err != nil {
			t.Fatal(err)
		}
		if run.Status == "done" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dry-run not done: %+v", run)
		}
	}

	page := func(token, path string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: "intend_console", Value: token})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		return string(body)
	}
	token := func(role string) string {
		tok, err := c.CreateToken(ctx, client.NewToken{Name: "console-" + role, Role: role, Environments: []string{env}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Secret
	}
	reader, author := token("read"), token("author")
	resourcePage := "/console/env/" + env + "/resource?id=" + url.QueryEscape(cmd["id"].(string))
	dryrunPage := fmt.Sprintf("/console/env/%s/dryrun/%d", env, dr.Run)
	const marker = "[redacted: sensitive output, visible to authors]"

	got := page(reader, resourcePage)
	if strings.Contains(got, minted) || !strings.Contains(got, "stdout="+marker) {
		t.Errorf("as read, the action log shows the output, or not the marker:\n%s", got)
	}
	got = page(reader, dryrunPage)
	if strings.Contains(got, "shadow-hash") || !strings.Contains(got, marker) ||
		!strings.Contains(got, "visible to the environment&#39;s authors and admins") {
		t.Errorf("as read, the dry-run shows the content, or not the marker:\n%s", got)
	}

	if got := page(author, resourcePage); !strings.Contains(got, "stdout="+minted) {
		t.Errorf("as author, the action log lacks the output:\n%s", got)
	}
	if got := page(author, dryrunPage); !strings.Contains(got, "-root:$6$salt$the-shadow-hash") ||
		!strings.Contains(got, "hidden from operators and readers") {
		t.Errorf("as author, the dry-run lacks the content diff or its note:\n%s", got)
	}
}
