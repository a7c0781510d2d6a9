package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/tlsfiles/certtest"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestTokenCommands: the first admin token is made against the database
// with nothing but its URL, and printed alone; with it, intend token
// makes, lists (never the secret) and revokes tokens; a revoked token is
// refused at once; whoami and audit tell who did what.
func TestTokenCommands(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	c, _, db := servertest.StartServer(t, server.Config{ReconcileEvery: time.Second})
	envName := testenv.UniqueName(t, "tok")

	out := ok(t, nil, "token", "create", "--database-url", db, "--name", "alice", "--role", "admin")
	first := strings.TrimSpace(out)
	if !strings.HasPrefix(first, auth.TokenPrefix) || strings.Count(out, "\n") != 1 {
		t.Fatalf("token create --database-url printed %q, want the secret alone on its line", out)
	}
	alice := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": first}
	// Made without the API, it is in the audit trail all the same: the
	// store writes the row with the token (never its secret).
	var made client.List[client.AuditEntry]
	if err := c.Do(t.Context(), http.MethodGet, "/api/v1/audit?action=token.create&actor=cli:database", nil, &made); err != nil {
		t.Fatal(err)
	}
	if len(made.Items) != 1 || made.Items[0].ActorKind != "cli" || !strings.Contains(string(made.Items[0].Detail), `"alice"`) ||
		!strings.Contains(string(made.Items[0].Detail), `"admin"`) || strings.Contains(string(made.Items[0].Detail), first) {
		t.Errorf("the audit rows of token create --database-url = %+v, want one naming alice and her role", made.Items)
	}
	ok(t, alice, "env", "create", envName, "--project", "p-"+envName)

	// A read token of the environment, made over the API.
	out = ok(t, alice, "token", "create", "--name", "grafana", "--role", "read", "--environments", envName, "--expires-in", "720h")
	reader := strings.TrimSpace(out)
	readerVars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": reader, "INTEND_ENVIRONMENT": envName}
	who := ok(t, readerVars, "token", "whoami")
	if field(t, who, "actor") != "token:grafana" || rowOf(t, who, envName)[1] != "read" {
		t.Errorf("whoami as grafana:\n%s", who)
	}
	ok(t, readerVars, "env", "show")
	fails(t, readerVars, exitFailed, []string{"Forbidden (403)", "needs role operator"}, "halt")

	list := ok(t, alice, "token", "list")
	for _, name := range []string{"alice", "grafana", "bootstrap"} {
		if !strings.Contains(list, name) {
			t.Errorf("token list lacks %s:\n%s", name, list)
		}
	}
	for _, secret := range []string{first, reader} {
		if strings.Contains(list, secret[len(auth.TokenPrefix)+8:]) {
			t.Errorf("token list shows a secret:\n%s", list)
		}
	}
	// More tokens than a page of GET /api/v1/tokens (100): the list
	// follows the pages and shows each token once.
	for i := range 110 {
		if _, err := c.CreateToken(t.Context(), client.NewToken{Name: fmt.Sprintf("many-%03d", i), Role: "read"}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []client.Token
	if err := json.Unmarshal([]byte(ok(t, alice, "token", "list", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tk := range listed {
		if seen[tk.ID] {
			t.Errorf("token list --json shows %s twice", tk.Name)
		}
		seen[tk.ID] = true
	}
	if len(listed) != 113 { // alice, grafana, bootstrap and 110
		t.Errorf("token list --json: %d tokens, want 113", len(listed))
	}
	// The executors of the environment (none registered): every page.
	if h := headerOf(ok(t, readerVars, "agent", "executors")); h != "EXECUTOR HOST AGENTS LIVE LAST SEEN" {
		t.Errorf("agent executors header %q", h)
	}

	ok(t, alice, "token", "revoke", "grafana")
	fails(t, readerVars, exitFailed, []string{"Unauthenticated (401)"}, "env", "show")

	// Without a token: 401, and the message says how to get one.
	fails(t, map[string]string{"INTEND_SERVER": c.Base}, exitFailed, []string{"Unauthenticated (401)", "intend token create"},
		"env", "list")
	// Bad input is a usage error before anything is sent.
	fails(t, alice, exitUsage, []string{"--role", "unknown role"}, "token", "create", "--name", "x", "--role", "root")
	fails(t, alice, exitUsage, []string{"--expires-in"}, "token", "create", "--name", "x", "--role", "read", "--expires-in", "soon")

	audit := ok(t, alice, "audit", "--all", "--actor", "token:alice")
	for _, action := range []string{"token.create", "token.revoke", "environment.create"} {
		if !strings.Contains(audit, action) {
			t.Errorf("the audit trail lacks alice's %s:\n%s", action, audit)
		}
	}
	// -o wide adds the actor's kind (a token here).
	if h := headerOf(ok(t, alice, "audit", "--all", "--actor", "token:alice", "-o", "wide")); h != "ID AT ENVIRONMENT ACTOR FROM ACTION STATUS PATH ACTOR KIND DETAIL" {
		t.Errorf("audit -o wide header %q", h)
	}
	envAudit := ok(t, map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": first, "INTEND_ENVIRONMENT": envName}, "audit")
	if !strings.Contains(envAudit, "token:grafana") || !strings.Contains(envAudit, "environment.halt") ||
		!strings.Contains(envAudit, "403") {
		t.Errorf("the environment's audit trail lacks grafana's refused halt:\n%s", envAudit)
	}
}

// TestCLIOverTLS: the CLI reaches a TLS server whose certificate a
// private CA signed with --ca-cert (or INTEND_CA_CERT), and refuses it
// without.
func TestCLIOverTLS(t *testing.T) {
	// Not parallel: see servertest.StartServer.
	dir := t.TempDir()
	ca := certtest.NewCA(t)
	caFile := ca.WriteCA(t, dir, "ca.pem")
	cert, key := ca.WritePair(t, dir, "server", "intend", "127.0.0.1")
	c, _, _ := servertest.StartServer(t, server.Config{TLSCert: cert, TLSKey: key})
	vars := map[string]string{"INTEND_SERVER": c.Base, "INTEND_TOKEN": c.Token}
	if out := ok(t, vars, "token", "whoami", "--ca-cert", caFile); field(t, out, "actor") != "token:bootstrap" {
		t.Errorf("whoami over TLS:\n%s", out)
	}
	vars["INTEND_CA_CERT"] = caFile
	ok(t, vars, "token", "whoami")
	delete(vars, "INTEND_CA_CERT")
	if r := cli(t, vars, "token", "whoami"); r.err == nil || !strings.Contains(r.err.Error(), "certificate") {
		t.Errorf("a server signed by an unknown CA was trusted: %s", r)
	}
	fails(t, vars, exitUsage, []string{"/does/not/exist.pem"}, "token", "whoami", "--ca-cert", "/does/not/exist.pem")
}
