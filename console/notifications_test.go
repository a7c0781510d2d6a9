package console_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleNotifications: the environment's header counts its unread
// notifications and links their page; the page lists them with what
// they are about; an operator marks one read and clears it with the
// page's buttons, a reader's button is refused by the API (403) and
// changes nothing.
func TestConsoleNotifications(t *testing.T) {
	c, s, _ := servertest.StartServer(t, server.Config{EmbeddedExecutor: true, ReconcileEvery: time.Second,
		SchedulerPoll: time.Second})
	ctx := context.Background()
	env := servertest.NewEnvironment(t, c, "cnotify", map[string]any{"autostart_agents": []string{},
		"agent_timeout": 1, "deploy_interval": 0})
	path := filepath.Join(t.TempDir(), "f")
	b, _ := json.Marshal(map[string]any{"resources": []any{map[string]any{"id": "fs::File[lonely,path=" + path + "]",
		"attributes": map[string]any{"path": path, "content": "x"}}}})
	servertest.Release(t, c, env, b)
	var n client.Notification
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ns, err := c.Notifications(ctx, env, false, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) > 0 {
			n = ns[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no notification of agent lonely within a minute")
		}
	}
	token := func(role string) string {
		tok, err := c.CreateToken(ctx, client.NewToken{Name: "console-" + role, Role: role, Environments: []string{env}})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Secret
	}
	reader, operator := token("read"), token("operator")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(tok, method, path string, form url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(&http.Cookie{Name: "intend_console", Value: tok})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	list := "/console/env/" + env + "/notifications"
	code, page := send(operator, http.MethodGet, list, nil)
	badge := `title="unread notifications">1<`
	if code != 200 || !strings.Contains(page, n.Title) || !strings.Contains(page, "agent <code>lonely</code>") ||
		!strings.Contains(page, badge) || !strings.Contains(page, "Mark read") {
		t.Fatalf("notifications page = %d:\n%s", code, page)
	}
	if _, home := send(operator, http.MethodGet, "/console/env/"+env, nil); !strings.Contains(home, badge) {
		t.Errorf("the environment's page lacks the count in its header")
	}
	csrfOf := func(page string) string {
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no csrf in:\n%s", page)
		}
		return m[1]
	}
	action := list + "/" + n.ID

	// A reader's press: the API refuses, nothing changes.
	_, readerPage := send(reader, http.MethodGet, list, nil)
	if code, _ := send(reader, http.MethodPost, action, url.Values{"csrf": {csrfOf(readerPage)}, "mark": {"read"}}); code != 403 {
		t.Errorf("a reader's mark = %d, want 403", code)
	}
	// A forged form: refused.
	if code, _ := send(operator, http.MethodPost, action, url.Values{"csrf": {"forged"}, "mark": {"read"}}); code != 403 {
		t.Errorf("a forged form = %d, want 403", code)
	}
	if ns, _ := c.Notifications(ctx, env, true, false); len(ns) != 1 {
		t.Fatalf("unread after the refusals: %+v, want the one", ns)
	}

	csrf := csrfOf(page)
	if code, _ := send(operator, http.MethodPost, action, url.Values{"csrf": {csrf}, "mark": {"read"}}); code != http.StatusSeeOther {
		t.Fatalf("mark read = %d, want 303", code)
	}
	_, page = send(operator, http.MethodGet, list, nil)
	if strings.Contains(page, badge) || strings.Contains(page, "Mark read") || !strings.Contains(page, ">read<") {
		t.Errorf("after mark read:\n%s", page)
	}
	if code, _ := send(operator, http.MethodPost, action, url.Values{"csrf": {csrf}, "mark": {"clear"}}); code != http.StatusSeeOther {
		t.Fatalf("clear = %d, want 303", code)
	}
	if _, page = send(operator, http.MethodGet, list, nil); strings.Contains(page, n.Title) {
		t.Errorf("a cleared notification is still listed:\n%s", page)
	}
	if _, page = send(operator, http.MethodGet, list+"?cleared=true", nil); !strings.Contains(page, n.Title) ||
		!strings.Contains(page, "cleared") {
		t.Errorf("with cleared ones the page lacks it:\n%s", page)
	}
	if code, _ := send(operator, http.MethodPost, action, url.Values{"csrf": {csrf}, "mark": {"delete"}}); code != 422 {
		t.Errorf("an unknown mark = %d, want 422", code)
	}
}
