package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// TestRunNotifiesOnce: a run that finishes with a failure notifies
// once; its finish retried (an activity's retry) counts no second
// occurrence.
func TestRunNotifiesOnce(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	v, err := intent.DecodeBytes([]byte(`{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportPartial(ctx, e.ID, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	take, err := st.TakeRequests(ctx, e.ID, "notify-"+e.Name, nil, false)
	if err != nil || take.Run == nil {
		t.Fatalf("take: %+v %v", take, err)
	}
	for range 2 {
		if err := st.FinishRun(ctx, e.ID, take.Run.Run, "done", store.RunCounts{Failed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := st.ListNotifications(ctx, e.ID, store.NotificationFilter{}, nil, 0)
	if err != nil || len(ns) != 1 || ns[0].Kind != store.NotifyRunFailed || ns[0].Occurrences != 1 ||
		ns[0].Run == nil || *ns[0].Run != take.Run.Run {
		t.Fatalf("notifications = %+v %v, want one run_failed of run %d, one occurrence", ns, err, take.Run.Run)
	}
}

// TestPruneNotifications: resolved notifications last seen before
// notification_retention go, recent and unresolved ones stay (an
// unresolved one holds its subject's place), another environment's are
// untouched; and beyond MaxNotificationsPerEnvironment resolved ones
// the oldest go whatever their age.
func TestPruneNotifications(t *testing.T) {
	t.Parallel()
	st, conn, e, other := retentionEnv(t)
	ctx := context.Background()
	e, err := st.UpdateEnvironment(ctx, e.ID, store.EnvironmentPatch{
		Settings: map[string]json.RawMessage{"notification_retention": json.RawMessage(`3600`)}})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(env, subject, seen string, resolved bool) {
		res := "null"
		if resolved {
			res = seen
		}
		exec(t, conn, `insert into notifications (environment_id, kind, severity, subject, title, message,
			created_at, last_seen_at, resolved_at)
			values ($1::uuid, 'compile_failed', 'error', $2, 't', 'm', `+seen+`, `+seen+`, `+res+`)`, env, subject)
	}
	for _, env := range []string{e.ID, other.ID} {
		insert(env, "resolved-old", old, true)
		insert(env, "resolved-recent", recent, true)
		insert(env, "open-old", old, false)
	}
	p := prune(t, st, conn, e, other, 0)
	if p[store.TableNotifications] != 1 {
		t.Errorf("pruned %v, want 1 notification", p)
	}
	q := `select subject from notifications where environment_id = $1::uuid`
	if got := strs(t, conn, q, e.ID); len(got) != 2 || got[0] != "open-old" || got[1] != "resolved-recent" {
		t.Errorf("left %v, want open-old and resolved-recent", got)
	}
	if n := count(t, conn, `select count(*) from notifications where environment_id = $1::uuid`, other.ID); n != 3 {
		t.Errorf("the other environment has %d notifications, want its 3", n)
	}

	// The bound: 1,004 more, so 1,005 recent resolved ones; the 5 oldest go.
	exec(t, conn, `insert into notifications (environment_id, kind, severity, subject, title, message,
		created_at, last_seen_at, resolved_at)
		select $1::uuid, 'run_failed', 'error', 'bulk', 't', 'm', now() - make_interval(secs => 1000 - i),
			now(), now() from generate_series(1, 1004) i`, e.ID)
	p = prune(t, st, conn, e, other, 0)
	if p[store.TableNotifications] != 5 {
		t.Errorf("pruned %v, want the 5 oldest resolved notifications", p)
	}
	if n := count(t, conn, `select count(*) from notifications where environment_id = $1::uuid and resolved_at is null`, e.ID); n != 1 {
		t.Errorf("%d unresolved notifications left, want 1", n)
	}
}

// TestAgentCheckCountsFromNotBefore: an agent whose executor was last
// seen long ago is not notified of before the check's NotBefore (when
// the server started watching) plus the timeout: executors that could
// not report while no server ran are not taken for gone.
func TestAgentCheckCountsFromNotBefore(t *testing.T) {
	t.Parallel()
	st, e := newStoreEnv(t)
	ctx := context.Background()
	v, err := intent.DecodeBytes([]byte(`{"resources": [{"id": "fs::File[h,path=/a]", "attributes": {"path": "/a"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.ExportPartial(ctx, e.ID, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReleaseVersion(ctx, e.ID, info.Version); err != nil {
		t.Fatal(err)
	}
	check := store.AgentCheck{EnvironmentID: e.ID, Timeout: time.Minute, NotBefore: time.Now()}
	// The agent appeared now: within a minute of now, and of NotBefore.
	if n, err := st.CheckAgentExecutors(ctx, []store.AgentCheck{check}); err != nil || n != 0 {
		t.Fatalf("within the timeout: wrote %d (%v), want 0", n, err)
	}
	// A minute past the agent's appearance, but not of NotBefore.
	check.Timeout, check.NotBefore = 0, time.Now().Add(time.Hour)
	if n, err := st.CheckAgentExecutors(ctx, []store.AgentCheck{check}); err != nil || n != 0 {
		t.Fatalf("before NotBefore: wrote %d (%v), want 0", n, err)
	}
	check.NotBefore = time.Time{}
	if n, err := st.CheckAgentExecutors(ctx, []store.AgentCheck{check}); err != nil || n != 1 {
		t.Fatalf("past the timeout: wrote %d (%v), want 1", n, err)
	}
}
