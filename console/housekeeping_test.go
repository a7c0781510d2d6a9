package console_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleHousekeeping: the environment's admin protects it from the
// console and cannot lift the protection (the page does not offer it,
// and a forged form is refused by the API); a global admin lifts it;
// clear and decommission do nothing until the environment's name is
// typed to confirm, then clear it.
func TestConsoleHousekeeping(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	env := servertest.NewEnvironment(t, c, "hkcon", nil)
	doc := []byte(`{"resources":[{"id":"fs::File[h,path=/x]","attributes":{"path":"/x"}}]}`)
	if _, err := c.ExportVersion(ctx, env, doc); err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, client.NewToken{Name: "console-admin", Role: "admin", Environments: []string{env}})
	if err != nil {
		t.Fatal(err)
	}
	envAdmin, global := tok.Secret, c.Token
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(token, method string, form url.Values) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, s.URL()+"/console/env/"+env+"/housekeeping", body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: "intend_console", Value: token})
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	csrfOf := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	post := func(token string, kv ...string) (int, string) {
		t.Helper()
		_, page := send(token, http.MethodGet, nil)
		m := csrfOf.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no form on the page:\n%s", page)
		}
		form := url.Values{"csrf": {m[1]}}
		for i := 0; i+1 < len(kv); i += 2 {
			form.Set(kv[i], kv[i+1])
		}
		return send(token, http.MethodPost, form)
	}
	protected := func() bool {
		e, err := c.Environment(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return e.Protected
	}

	code, page := send(envAdmin, http.MethodGet, nil)
	if code != 200 || !strings.Contains(page, ">Protect</button>") || !strings.Contains(page, ">Clear</button>") {
		t.Fatalf("the admin's page: %d\n%s", code, page)
	}
	if code, _ := post(envAdmin, "action", "protect"); code != http.StatusSeeOther || !protected() {
		t.Fatalf("protect: %d, protected %v", code, protected())
	}
	_, page = send(envAdmin, http.MethodGet, nil)
	if strings.Contains(page, "Lift the protection") || strings.Contains(page, ">Clear</button>") ||
		!strings.Contains(page, "refuses clear, decommission and delete") {
		t.Errorf("the environment admin's page of a protected environment:\n%s", page)
	}
	if code, page := post(envAdmin, "action", "unprotect"); code != http.StatusForbidden || !protected() ||
		!strings.Contains(page, "environment.unprotect needs role admin in every environment") {
		t.Errorf("unprotect by the environment's admin: %d, protected %v\n%s", code, protected(), page)
	}
	if code, page := post(envAdmin, "action", "clear", "confirm", env); code != http.StatusConflict ||
		!strings.Contains(page, "is protected") {
		t.Errorf("clear of a protected environment: %d\n%s", code, page)
	}
	if _, page := send(global, http.MethodGet, nil); !strings.Contains(page, "Lift the protection") {
		t.Errorf("the global admin's page lacks the lift:\n%s", page)
	}
	if code, _ := post(global, "action", "unprotect"); code != http.StatusSeeOther || protected() {
		t.Fatalf("unprotect by a global admin: %d, protected %v", code, protected())
	}

	for _, confirm := range []string{"", "other", strings.ToUpper(env)} {
		code, page := post(envAdmin, "action", "clear", "confirm", confirm)
		if code != http.StatusUnprocessableEntity || !strings.Contains(page, "Nothing was done: type the environment") {
			t.Errorf("clear confirmed with %q: %d\n%s", confirm, code, page)
		}
	}
	if e, _ := c.Environment(ctx, env); e.LastVersion != 1 {
		t.Fatalf("an unconfirmed clear changed the environment: %+v", e)
	}
	if code, _ := post(envAdmin, "action", "clear", "confirm", env); code != http.StatusSeeOther {
		t.Fatalf("clear: %d", code)
	}
	var vs struct {
		Items []any `json:"items"`
	}
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "versions"), nil, &vs); err != nil || len(vs.Items) != 0 {
		t.Errorf("versions after the console's clear: %v %v", vs.Items, err)
	}
	if code, _ := post(envAdmin, "action", "decommission", "confirm", env); code != http.StatusSeeOther {
		t.Errorf("decommission of an empty environment: %d", code)
	}
	if code, _ := post(envAdmin, "action", "bogus"); code != http.StatusUnprocessableEntity {
		t.Errorf("an unknown action: %d", code)
	}
}
