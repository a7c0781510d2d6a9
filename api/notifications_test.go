package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
	"github.com/intendhq/intend/internal/store"
)

// notifyOfAgents releases a version of env whose resources are on
// agents h1..hn, none of which has an executor, and runs the check
// that notifies of agents without one (a timeout of 0: at once).
func notifyOfAgents(t *testing.T, f *fixture, env string, n int) (envID string) {
	t.Helper()
	var rs []string
	for i := 1; i <= n; i++ {
		rs = append(rs, fmt.Sprintf(`{"id":"fs::File[h%d,path=/n%d]","attributes":{"path":"/n%d","content":"x"},"requires":[]}`, i, i, i))
	}
	f.mustCall("PUT", "/api/v1/environments/"+env+"/versions", version(rs...), 201)
	f.mustCall("POST", "/api/v1/environments/"+env+"/versions/1/release", "", 200)
	envID = f.mustCall("GET", "/api/v1/environments/"+env, "", 200)["id"].(string)
	written, err := f.st.CheckAgentExecutors(context.Background(), []store.AgentCheck{{EnvironmentID: envID}})
	if err != nil || written != int64(n) {
		t.Fatalf("check agents = %d %v, want %d notifications", written, err, n)
	}
	return envID
}

// TestNotificationsListAndMarks: the list is newest first and paged
// (?after=&limit=), ?unread=true leaves out what was read, cleared ones
// show only with ?cleared=true; the same condition checked again writes
// nothing more; read lists and reads, operator marks, and another
// environment's notification is not found.
func TestNotificationsListAndMarks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{})
	f.env("nt")
	f.env("nt-other")
	envID := notifyOfAgents(t, f, "nt", 5)
	// Checked again: one notification per agent still.
	if n, err := f.st.CheckAgentExecutors(context.Background(), []store.AgentCheck{{EnvironmentID: envID}}); err != nil || n != 0 {
		t.Fatalf("second check wrote %d (%v), want 0", n, err)
	}
	const base = "/api/v1/environments/nt/notifications"

	follow := func(query string, limit int) ([]map[string]any, int) {
		t.Helper()
		var got []map[string]any
		pages := 0
		for after := ""; pages < 10; {
			q, _ := url.ParseQuery(query)
			q.Set("limit", fmt.Sprint(limit))
			if after != "" {
				q.Set("after", after)
			}
			out := f.mustCall("GET", base+"?"+q.Encode(), "", 200)
			pages++
			for _, it := range out["items"].([]any) {
				got = append(got, it.(map[string]any))
			}
			next, _ := out["next"].(string)
			if next == "" {
				break
			}
			after = next
		}
		return got, pages
	}
	all, pages := follow("", 2)
	if len(all) != 5 || pages != 3 {
		t.Fatalf("by 2: %d notifications in %d pages, want 5 in 3", len(all), pages)
	}
	agents := map[string]bool{}
	for i, n := range all {
		if n["kind"] != "agent_without_executor" || n["severity"] != "warning" || n["occurrences"] != float64(1) ||
			!strings.Contains(n["title"].(string), n["agent"].(string)) {
			t.Errorf("notification %d = %v", i, n)
		}
		agents[n["agent"].(string)] = true
		if i > 0 && n["created_at"].(string) > all[i-1]["created_at"].(string) {
			t.Errorf("notification %d is newer than the one before it: not newest first", i)
		}
	}
	if len(agents) != 5 {
		t.Errorf("agents of the notifications: %v, want h1..h5 once each", agents)
	}

	reader := f.newToken("nt-read", "read", []string{envID})
	operator := f.newToken("nt-operator", "operator", []string{envID})
	first := all[0]["id"].(string)
	path := base + "/" + first
	if code, out := f.callAs("GET", path, "", reader, nil); code != 200 || out["id"] != first {
		t.Errorf("GET one as read = %d %v", code, out)
	}
	if code, out := f.callAs("PATCH", path, `{"read":true}`, reader, nil); code != 403 {
		t.Errorf("PATCH as read = %d %v, want 403", code, out)
	}
	code, out := f.callAs("PATCH", path, `{"read":true}`, operator, nil)
	if code != 200 || out["read_at"] == nil || out["cleared_at"] != nil {
		t.Fatalf("PATCH read as operator = %d %v", code, out)
	}
	if unread, _ := follow("unread=true", 100); len(unread) != 4 {
		t.Errorf("unread after one was read: %d, want 4", len(unread))
	}
	second := all[1]["id"].(string)
	if code, out := f.callAs("PATCH", base+"/"+second, `{"cleared":true}`, operator, nil); code != 200 || out["cleared_at"] == nil {
		t.Errorf("PATCH cleared = %d %v", code, out)
	}
	if open, _ := follow("", 100); len(open) != 4 {
		t.Errorf("list after one was cleared: %d, want 4", len(open))
	}
	if every, _ := follow("cleared=true", 100); len(every) != 5 {
		t.Errorf("list with cleared ones: %d, want 5", len(every))
	}
	if unread, _ := follow("unread=true", 100); len(unread) != 3 {
		t.Errorf("unread after one read and one cleared: %d, want 3", len(unread))
	}
	// A mark taken off.
	if code, out := f.callAs("PATCH", path, `{"read":false}`, operator, nil); code != 200 || out["read_at"] != nil {
		t.Errorf("PATCH read false = %d %v", code, out)
	}

	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"PATCH", path, `{}`, 422},
		{"PATCH", path, `{"read":"yes"}`, 422},
		{"PATCH", path, `{"seen":true}`, 422},
		{"PATCH", base + "/00000000-0000-0000-0000-000000000001", `{"read":true}`, 404},
		{"GET", base + "/not-an-id", "", 404},
		// Another environment's notification: not found in this one.
		{"GET", "/api/v1/environments/nt-other/notifications/" + first, "", 404},
		{"PATCH", "/api/v1/environments/nt-other/notifications/" + first, `{"read":true}`, 404},
		{"GET", base + "?unread=yes", "", 422},
		{"GET", base + "?after=not-a-cursor", "", 422},
		{"GET", base + "?limit=1001", "", 422},
	} {
		if code, out := f.call(tc.method, tc.path, tc.body); code != tc.want {
			t.Errorf("%s %s %s = %d %v, want %d", tc.method, tc.path, tc.body, code, out, tc.want)
		}
	}
	// A token of the other environment does not see this one's.
	otherID := f.mustCall("GET", "/api/v1/environments/nt-other", "", 200)["id"].(string)
	stranger := f.newToken("nt-stranger", "admin", []string{otherID})
	if code, _ := f.callAs("GET", base, "", stranger, nil); code != 404 {
		t.Errorf("list as another environment's admin = %d, want 404", code)
	}
}

// TestNotificationWebhookSettings: only an admin sets or removes the
// webhook, under the LSM callbacks' URL rules (--lsm-callback-hosts
// included); the secret shows once; the webhook is no LSM callback.
func TestNotificationWebhookSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t, api.Options{CallbackHosts: []string{"hooks.example.com", "127.0.0.1"}})
	f.env("wh")
	envID := f.mustCall("GET", "/api/v1/environments/wh", "", 200)["id"].(string)
	reader := f.newToken("wh-read", "read", []string{envID})
	operator := f.newToken("wh-operator", "operator", []string{envID})
	author := f.newToken("wh-author", "author", []string{envID})
	const hook = "/api/v1/environments/wh/notifications/webhook"

	if code, _ := f.call("GET", hook, ""); code != 404 {
		t.Errorf("GET without a webhook = %d, want 404", code)
	}
	for _, tok := range []string{reader, operator, author} {
		if code, out := f.callAs("PUT", hook, `{"url":"https://hooks.example.com/n"}`, tok, nil); code != 403 {
			t.Errorf("PUT below admin = %d %v, want 403", code, out)
		}
	}
	for _, bad := range []string{
		`{"url":""}`,
		`{"url":"ftp://hooks.example.com/n"}`,
		`{"url":"https://user:pw@hooks.example.com/n"}`,
		`{"url":"https://hooks.example.com/n#frag"}`,
		`{"url":"http://169.254.169.254/latest/meta-data"}`, // not on --lsm-callback-hosts
		`{"url":"http://localhost:5432/"}`,
		`{"url":"https://hooks.example.com/n","secret":"mine"}`,
	} {
		if code, out := f.call("PUT", hook, bad); code != 422 {
			t.Errorf("PUT %s = %d %v, want 422", bad, code, out)
		}
	}
	if code, _ := f.call("GET", hook, ""); code != 404 {
		t.Errorf("GET after the refusals = %d, want 404 (nothing stored)", code)
	}
	set := f.mustCall("PUT", hook, `{"url":"https://hooks.example.com/n"}`, 200)
	secret, _ := set["secret"].(string)
	if len(secret) != 64 || set["url"] != "https://hooks.example.com/n" {
		t.Fatalf("PUT = %v", set)
	}
	code, got := f.callAs("GET", hook, "", reader, nil)
	if code != 200 || got["url"] != "https://hooks.example.com/n" || got["secret"] != nil || got["service_entity"] != nil ||
		strings.Contains(fmt.Sprint(got), secret) {
		t.Errorf("GET as read = %d %v, want the URL and no secret", code, got)
	}
	// Replaced: a new secret, one webhook.
	again := f.mustCall("PUT", hook, `{"url":"http://127.0.0.1:9/n"}`, 200)
	if again["secret"] == secret || again["id"] != set["id"] {
		t.Errorf("replaced webhook = %v, want the same one with a new secret", again)
	}
	// Not an LSM callback: the LSM list leaves it out.
	h := http.Header{}
	h.Set(api.EnvironmentHeader, "wh")
	if code, out := f.callAs("GET", "/lsm/v1/callbacks", "", f.token, h); code != 200 || len(out["items"].([]any)) != 0 {
		t.Errorf("LSM callbacks = %d %v, want none", code, out)
	}
	if code, _ := f.callAs("DELETE", hook, "", operator, nil); code != 403 {
		t.Errorf("DELETE as operator = %d, want 403", code)
	}
	f.mustCall("DELETE", hook, "", 200)
	f.mustCall("GET", hook, "", 404)
	f.mustCall("DELETE", hook, "", 404)
}
