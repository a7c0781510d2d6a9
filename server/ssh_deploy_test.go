package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/sshtest"
	"github.com/intendhq/intend/server"
)

// TestSSHDeploy deploys an ssh::Directory and an ssh::File that requires
// it, agentless over SSH to a throwaway sshd on this machine, end to end
// (API → PostgreSQL → Temporal → embedded executor → SFTP); the private key
// is a secret reference, and its text appears in no API response.
func TestSSHDeploy(t *testing.T) {
	srv := sshtest.Start(t)
	// The key is read from the embedded executor's secrets directory.
	c, _, _ := startValidated(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second, SecretsDir: srv.Dir})
	ctx := context.Background()
	env := newEnv(t, c, "ssh", map[string]any{"deploy_interval": 0, "repair_interval": 0})
	dir := filepath.Join(t.TempDir(), "srv", "app")
	path := filepath.Join(dir, "config.txt")
	dirID := "ssh::Directory[localhost,path=" + dir + "]"
	fileID := "ssh::File[localhost,path=" + path + "]"
	keyFile, err := filepath.Rel(srv.Dir, srv.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	keyRef := map[string]any{"secret": "file:" + keyFile}
	connection := func(attrs map[string]any) map[string]any {
		attrs["host"], attrs["port"], attrs["user"] = srv.Host, srv.Port, srv.User
		attrs["host_key"], attrs["private_key"] = srv.HostKey, keyRef
		return attrs
	}
	version := func(content string) []byte {
		return body(t,
			res{ID: dirID, Attributes: connection(map[string]any{"path": dir, "mode": "0750", "owner": "daemon", "group": "daemon"})},
			res{ID: fileID, Attributes: connection(map[string]any{"path": path, "content": content, "mode": "0640"}),
				Requires: []string{dirID}},
		)
	}

	run := deploy(t, c, env, version("over ssh\n"))
	if run.Total != 2 || run.Deployed != 2 || run.Failed != 0 {
		t.Fatalf("run 1 = %+v, want both resources deployed", run)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o750 || st.Uid == 0 || st.Gid == 0 {
		t.Errorf("directory = %v owned %d:%d, want a 0750 directory owned by daemon:daemon", fi.Mode(), st.Uid, st.Gid)
	}
	if got, mode := readFile(t, path); got != "over ssh\n" || mode != 0o640 {
		t.Errorf("file = %q %04o, want %q 0640", got, mode, "over ssh\n")
	}
	for _, id := range []string{dirID, fileID} {
		st, acts := getResource(t, c, env, id)
		if st.LastResult != "deployed" || st.Compliance != "compliant" || st.DeployedHash != st.IntentHash {
			t.Errorf("%s state = %+v, want deployed and compliant", id, st)
		}
		if len(acts) != 1 || acts[0].Result != "deployed" {
			t.Fatalf("%s actions = %+v, want one deploy", id, acts)
		}
		changes := sshChanges(t, acts[0].Changes)
		if changes["path"].From != nil {
			t.Errorf("%s changes = %s, want a create (from null)", id, acts[0].Changes)
		}
		if ref, _ := changes["private_key"].To.(map[string]any); ref["secret"] != keyRef["secret"] {
			t.Errorf("%s changes = %s, want the key's reference as private_key", id, acts[0].Changes)
		}
	}
	if _, acts := getResource(t, c, env, fileID); !strings.Contains(string(acts[0].Logs), "wrote file") {
		t.Errorf("the file's action lacks its write: logs=%s", acts[0].Logs)
	}
	var facts struct{ Items []client.Fact }
	if err := c.Do(ctx, http.MethodGet, "/api/v1/environments/"+env+"/resources/"+url.PathEscape(fileID)+"/facts",
		nil, &facts); err != nil {
		t.Fatal(err)
	}
	if !hasFact(facts.Items, fileID, "size", "9") {
		t.Errorf("facts of the file = %+v, want size 9", facts.Items)
	}

	// Version 2 changes the content only: the connection attributes, the
	// same, are not part of the diff.
	run = deploy(t, c, env, version("over ssh, v2\n"))
	if run.Total != 1 || run.Deployed != 1 || run.Failed != 0 {
		t.Fatalf("run 2 = %+v, want the file deployed again, the directory untouched", run)
	}
	if got, _ := readFile(t, path); got != "over ssh, v2\n" {
		t.Errorf("file after v2 = %q", got)
	}
	_, acts := getResource(t, c, env, fileID)
	if len(acts) != 2 || acts[0].Version != 2 || acts[0].Result != "deployed" {
		t.Fatalf("file actions = %+v, want v2's deploy first", acts)
	}
	if changes := sshChanges(t, acts[0].Changes); len(changes) != 1 || changes["content"].To != "over ssh, v2\n" {
		t.Errorf("v2 changes = %s, want only content", acts[0].Changes)
	}

	// The key's text is in no response; its reference is, so the
	// responses checked are the ones that hold the attributes.
	base := "/api/v1/environments/" + env
	paths := []string{base + "/resources", base + "/actions", base + "/facts", base + "/versions/1", base + "/versions/2"}
	for _, id := range []string{dirID, fileID} {
		p := base + "/resources/" + url.PathEscape(id)
		paths = append(paths, p, p+"/actions", p+"/facts")
	}
	sawRef := false
	for _, p := range paths {
		var raw json.RawMessage
		if err := c.Do(ctx, http.MethodGet, p, nil, &raw); err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		for _, line := range sshKeyLines(srv.ClientKey) {
			if strings.Contains(string(raw), line) {
				t.Errorf("GET %s shows the private key's text", p)
				break
			}
		}
		sawRef = sawRef || strings.Contains(string(raw), keyRef["secret"].(string))
	}
	if !sawRef {
		t.Errorf("no response holds the key's reference %s; the check above looked at the wrong responses", keyRef["secret"])
	}
}

// sshKeyLines are the lines of a PEM key's body, each distinctive enough
// that finding one in a response means the key leaked.
func sshKeyLines(pemText string) []string {
	var out []string
	for _, l := range strings.Split(pemText, "\n") {
		if len(l) >= 20 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

// sshChanges decodes the changes of an action record.
func sshChanges(t *testing.T, raw json.RawMessage) map[string]struct{ From, To any } {
	t.Helper()
	var out map[string]struct{ From, To any }
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("changes %s: %v", raw, err)
	}
	return out
}
