package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/intendhq/intend/callbacks"
	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/testenv/wait"
	"github.com/intendhq/intend/server"
)

// hookDelivery is one request the notification receiver got.
type hookDelivery struct {
	header http.Header
	body   []byte
	status int
}

// notificationReceiver is a webhook receiver on loopback that answers
// 500 to its first request and 200 to the others, recording them all.
type notificationReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []hookDelivery
}

func newNotificationReceiver(t *testing.T) *notificationReceiver {
	r := &notificationReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		status := http.StatusOK
		if len(r.got) == 0 {
			status = http.StatusInternalServerError
		}
		r.got = append(r.got, hookDelivery{header: req.Header.Clone(), body: body, status: status})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *notificationReceiver) deliveries() []hookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookDelivery(nil), r.got...)
}

// notificationsOf lists env's notifications, cleared ones too.
func notificationsOf(t *testing.T, c *client.Client, env string) []client.Notification {
	t.Helper()
	ns, err := c.Notifications(context.Background(), env, false, true)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitNotification waits until env has a notification that cond accepts.
func waitNotification(t *testing.T, c *client.Client, env string, cond func(client.Notification) bool) client.Notification {
	t.Helper()
	var found client.Notification
	wait.For(t, "a notification of "+env, 60*time.Second, func() error {
		ns := notificationsOf(t, c, env)
		for _, n := range ns {
			if cond(n) {
				found = n
				return nil
			}
		}
		return fmt.Errorf("notifications of %s: %+v", env, ns)
	})
	return found
}

func startNotifyServer(t *testing.T) *client.Client {
	t.Helper()
	c, _, _ := startValidated(t, server.Config{
		EmbeddedExecutor: true, ReconcileEvery: time.Second, SchedulerPoll: time.Second, DataDir: t.TempDir(),
		AllowLocalRepos: true,
		Callbacks: server.CallbackOptions{Timeout: time.Second, MinBackoff: 100 * time.Millisecond,
			MaxBackoff: time.Second, Poll: time.Second},
	})
	return c
}

// TestRunFailureNotifiesTheWebhook: a deploy run that finishes with a
// failed resource writes one run_failed notification linking the run,
// and the environment's webhook receives it signed with the secret the
// PUT showed, again after a 500 (at least once), the event id being the
// notification's; a run without failures resolves it.
func TestRunFailureNotifiesTheWebhook(t *testing.T) {
	c := startNotifyServer(t)
	ctx := context.Background()
	env := newEnv(t, c, "nrun", map[string]any{"deploy_interval": 0})
	rcv := newNotificationReceiver(t)
	var hook client.CreatedCallback
	if err := c.Do(ctx, http.MethodPut, client.EnvPath(env, "notifications", "webhook"),
		client.NotificationWebhook{URL: rcv.srv.URL + "/hook"}, &hook); err != nil || len(hook.Secret) != 64 {
		t.Fatalf("PUT webhook: %+v %v", hook, err)
	}

	dir := t.TempDir()
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run := deploy(t, c, env, body(t, file(filepath.Join(dir, "ok"), "ok\n", "0644"),
		file(filepath.Join(blocker, "bad"), "bad\n", "0644")))
	if run.Failed != 1 {
		t.Fatalf("run = %+v, want one failure", run)
	}
	n := waitNotification(t, c, env, func(n client.Notification) bool { return n.Kind == "run_failed" })
	if n.Run == nil || *n.Run != run.Run || n.Severity != "error" || n.Occurrences != 1 || n.ResolvedAt != nil {
		t.Errorf("notification = %+v, want run %d", n, run.Run)
	}

	// Delivered: the first attempt got a 500, the second is signed.
	var ok hookDelivery
	wait.For(t, "a delivery answered 200", 30*time.Second, func() error {
		ds := rcv.deliveries()
		for _, d := range ds {
			if d.status == http.StatusOK {
				ok = d
				return nil
			}
		}
		return fmt.Errorf("%d deliveries, none answered 200", len(ds))
	})
	if err := callbacks.Verify(hook.Secret, ok.header, ok.body, time.Now(), 0); err != nil {
		t.Errorf("delivery's signature: %v", err)
	}
	if err := callbacks.Verify("another secret", ok.header, ok.body, time.Now(), 0); err == nil {
		t.Error("a delivery verifies with another secret")
	}
	var got callbacks.Notification
	if err := json.Unmarshal(ok.body, &got); err != nil {
		t.Fatalf("body %s: %v", ok.body, err)
	}
	if got.ID != n.ID || got.EventID != n.ID || ok.header.Get(callbacks.EventIDHeader) != n.ID ||
		got.Kind != "run_failed" || got.Run == nil || *got.Run != run.Run || got.EnvironmentName != env ||
		got.Title != n.Title || ok.header.Get(callbacks.AttemptHeader) != "2" {
		t.Errorf("delivery = %+v (headers %v), want notification %+v on attempt 2", got, ok.header, n)
	}
	first := rcv.deliveries()[0]
	if first.status != http.StatusInternalServerError || first.header.Get(callbacks.EventIDHeader) != n.ID {
		t.Errorf("first delivery = %d %v, want the same event refused with 500", first.status, first.header)
	}
	// The dispatcher records the delivery once the receiver answered.
	wait.For(t, "the webhook delivery to be recorded", 30*time.Second, func() error {
		var view client.CallbackView
		err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "notifications", "webhook"), nil, &view)
		return wait.Unless(err == nil && view.Stats.Delivered == 1 && view.Stats.Pending == 0, "webhook view = %+v %v, want one delivered", view, err)
	})

	// The cause fixed, a run without failures resolves it.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	req, err := c.Deploy(ctx, env, "incremental")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.WaitRequest(ctx, env, req.ID, 60*time.Second, nil); err != nil || again.Failed != 0 {
		t.Fatalf("second run = %+v %v", again, err)
	}
	waitNotification(t, c, env, func(x client.Notification) bool { return x.ID == n.ID && x.ResolvedAt != nil })
	if ns := notificationsOf(t, c, env); len(ns) != 1 {
		t.Errorf("notifications = %+v, want only the resolved one", ns)
	}
}

// TestCompileFailureNotifies: a failed autonomous compile writes a
// compile_failed notification linking the compile and saying its first
// error; a second failure counts an occurrence on it (linking the newer
// compile) instead of adding one; a compile that succeeds resolves it.
func TestCompileFailureNotifies(t *testing.T) {
	c := startNotifyServer(t)
	repo := newModelRepo(t)
	repo.push(`	motd: fs.#File & {path: "/tmp/x", content: 42}
`)
	env := newEnv(t, c, "ncomp", map[string]any{"repo_url": repo.Bare})
	first := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	if first.Status != "failed" {
		t.Fatalf("compile = %+v, want failed", first)
	}
	n := waitNotification(t, c, env, func(n client.Notification) bool { return n.Kind == "compile_failed" })
	if n.Compile == nil || *n.Compile != first.ID || n.Message == "" || n.Occurrences != 1 {
		t.Errorf("notification = %+v, want compile %d", n, first.ID)
	}
	second := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second)
	ns := notificationsOf(t, c, env)
	if len(ns) != 1 || ns[0].ID != n.ID || ns[0].Occurrences != 2 || ns[0].Compile == nil || *ns[0].Compile != second.ID {
		t.Errorf("after a second failure: %+v, want one notification, 2 occurrences, compile %d", ns, second.ID)
	}
	repo.push(siteResources(filepath.Join(t.TempDir(), "site"), "hi\n"))
	if fixed := waitCompile(t, c, env, requestCompile(t, c, env).ID, 60*time.Second); fixed.Status != "succeeded" {
		t.Fatalf("fixed compile = %+v", fixed)
	}
	if ns := notificationsOf(t, c, env); len(ns) != 1 || ns[0].ResolvedAt == nil {
		t.Errorf("after a success: %+v, want the notification resolved", ns)
	}
}

// TestAgentWithoutExecutorNotifies: an agent of the released version
// that no executor serves for longer than agent_timeout gets one
// notification, however many times the reconciler looks; an executor
// for it resolves the notification.
func TestAgentWithoutExecutorNotifies(t *testing.T) {
	c := startNotifyServer(t)
	ctx := context.Background()
	settings := map[string]any{"autostart_agents": []string{}, "agent_timeout": 1, "deploy_interval": 0}
	env := newEnv(t, c, "nagent", settings)
	dir := t.TempDir()
	releaseFile := func(env, name string) {
		t.Helper()
		v, err := c.ExportVersion(ctx, env, body(t, file(filepath.Join(dir, name), "x\n", "0644")))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, http.MethodPost, client.EnvPath(env, "versions", fmt.Sprint(v.Version), "release"), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	releaseFile(env, "a")
	n := waitNotification(t, c, env, func(n client.Notification) bool { return n.Kind == "agent_without_executor" })
	if n.Agent != "localhost" || n.Severity != "warning" {
		t.Errorf("notification = %+v, want agent localhost", n)
	}
	// The reconciler has looked again once a second environment's
	// agent, released after the first notification, is notified of.
	other := newEnv(t, c, "nagent2", settings)
	releaseFile(other, "b")
	waitNotification(t, c, other, func(n client.Notification) bool { return n.Kind == "agent_without_executor" })
	if ns := notificationsOf(t, c, env); len(ns) != 1 || ns[0].ID != n.ID || ns[0].Occurrences != 1 {
		t.Errorf("after more checks: %+v, want the one notification", ns)
	}

	// The embedded executor serves the agent: resolved.
	if err := c.Do(ctx, http.MethodPatch, client.EnvPath(env),
		map[string]any{"settings": map[string]any{"autostart_agents": []string{"*"}}}, nil); err != nil {
		t.Fatal(err)
	}
	waitNotification(t, c, env, func(x client.Notification) bool { return x.ID == n.ID && x.ResolvedAt != nil })
}
