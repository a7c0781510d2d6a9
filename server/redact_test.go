package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/ledger"
	"github.com/intendhq/intend/internal/testenv"
)

// TestSensitiveOutputsAreRedactedBelowAuthor is issue 26's attack, end to
// end through the embedded executor: an author's exec::Command prints an
// admin token it minted, and an author's dry-run of an fs::File over a
// file of secrets (/etc/shadow) diffs its content. A read token, and an
// operator, of the environment read the action log, the resource's page
// and the dry-run report: the outputs are redacted there, the rest of the
// record is not; an author reads them whole.
func TestSensitiveOutputsAreRedactedBelowAuthor(t *testing.T) {
	c, s := startServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "redact", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	as := func(role string) *client.Client {
		tok, err := c.CreateToken(ctx, client.NewToken{Name: testenv.UniqueName(t, role), Role: role, Environments: []string{env}})
		if err != nil {
			t.Fatal(err)
		}
		cl := client.New(s.URL())
		cl.Token = tok.Secret
		return cl
	}
	reader, operator, author := as("read"), as("operator"), as("author")
	get := func(cl *client.Client, path string) string {
		t.Helper()
		var raw json.RawMessage
		if err := cl.Do(ctx, http.MethodGet, path, nil, &raw); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return string(raw)
	}

	const minted = "intend_minted-by-the-command-0123456789abcdef"
	dir := t.TempDir()
	// The token comes from the target (here a file the command reads, as
	// a tool that mints one would print it), not from the intent, which
	// every reader may read.
	if err := os.WriteFile(filepath.Join(dir, "minted"), []byte(minted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := res{ID: "exec::Command[localhost,name=mint]", Attributes: map[string]any{
		"name":    "mint",
		"command": `cat minted; printf 'warning ' >&2; cat minted >&2; touch made`,
		"cwd":     dir,
		"creates": filepath.Join(dir, "made"),
	}}
	if run := deploy(t, c, env, body(t, cmd)); run.Deployed != 1 {
		t.Fatalf("run = %+v, want the command deployed", run)
	}
	envPath := "/api/v1/environments/" + env
	logPaths := []string{envPath + "/actions", envPath + "/resources/" + url.PathEscape(cmd.ID),
		envPath + "/resources/" + url.PathEscape(cmd.ID) + "/actions"}
	for role, cl := range map[string]*client.Client{"read": reader, "operator": operator} {
		for _, p := range logPaths {
			got := get(cl, p)
			if strings.Contains(got, minted) {
				t.Errorf("a %s token reads the command's output at %s: %s", role, p, got)
			}
			if !strings.Contains(got, ledger.RedactedOutput) || !strings.Contains(got, `"exit_code":0`) {
				t.Errorf("%s at %s: want the output redacted and the rest of the line kept: %s", role, p, got)
			}
		}
	}
	var acts client.List[client.Action]
	if err := author.Do(ctx, http.MethodGet, envPath+"/actions", nil, &acts); err != nil || len(acts.Items) != 1 {
		t.Fatalf("the author's action log: %+v, %v", acts, err)
	}
	var lines []struct {
		Msg   string         `json:"msg"`
		Attrs map[string]any `json:"attrs"`
	}
	if err := json.Unmarshal(acts.Items[0].Logs, &lines); err != nil {
		t.Fatal(err)
	}
	seen := false
	for _, l := range lines {
		seen = seen || (l.Msg == "command exited" && l.Attrs["stdout"] == minted+"\n" && l.Attrs["stderr"] == "warning "+minted+"\n")
	}
	if !seen {
		t.Errorf("the author does not read the command's output: %s", acts.Items[0].Logs)
	}

	// An fs::File over a file of secrets, dry-run (an operator may ask).
	shadow := filepath.Join(dir, "shadow")
	const hash = "$6$salt$the-shadow-hash-of-root"
	if err := os.WriteFile(shadow, []byte("root:"+hash+":19000:0:99999:7:::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := file(shadow, "root:x:19000:0:99999:7:::\n", "0600")
	v, err := c.ExportVersion(ctx, env, body(t, cmd, f))
	if err != nil {
		t.Fatal(err)
	}
	dr, err := operator.RequestDryrun(ctx, env, client.DryrunRequest{Version: v.Version})
	if err != nil {
		t.Fatal(err)
	}
	waitDryrun(t, c, env, dr.Run)
	dryPath := fmt.Sprintf("%s/dryrun/%d", envPath, dr.Run)
	for role, cl := range map[string]*client.Client{"read": reader, "operator": operator} {
		for _, p := range []string{dryPath, envPath + "/actions?action=dryrun",
			envPath + "/actions?resource=" + url.QueryEscape(f.ID)} {
			if got := get(cl, p); strings.Contains(got, "shadow-hash") {
				t.Errorf("a %s token reads the file's content at %s: %s", role, p, got)
			}
		}
		var rep dryrunReport
		if err := cl.Do(ctx, http.MethodGet, dryPath, nil, &rep); err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if r.ResourceID != f.ID {
				continue
			}
			var changes map[string]map[string]any
			if err := json.Unmarshal(r.Changes, &changes); err != nil {
				t.Fatal(err)
			}
			if c := changes["content"]; r.Status != "modified" || c["from"] != ledger.RedactedOutput ||
				c["to"] != ledger.RedactedOutput || c["redacted"] != true || c["diff"] != nil {
				t.Errorf("%s: the file's dry-run result is %s %s, want modified with its content redacted", role, r.Status, r.Changes)
			}
		}
	}
	if got := get(author, dryPath); !strings.Contains(got, `-root:`+hash) || !strings.Contains(got, `+root:x:`) {
		t.Errorf("the author does not read the content diff: %s", got)
	}
}
