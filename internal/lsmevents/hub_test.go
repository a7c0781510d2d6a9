package lsmevents_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/lsmevents"
	"github.com/intendhq/intend/internal/store"
	"github.com/intendhq/intend/internal/testenv"
	"github.com/intendhq/intend/internal/testenv/wait"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestHubWakesOnNotify: with the fallback poll out of the way (an hour),
// a committed transfer wakes the subscriptions of its instance, and only
// those, through LISTEN/NOTIFY; a subscription that delivered the version
// is not woken; a closed one is gone.
func TestHubWakesOnNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.CreateProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	e, err := st.CreateEnvironment(ctx, store.NewEnvironment{Project: "p", Name: "e"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterEntities(ctx, e.ID, "h", []lsm.Entity{{Name: "vm", Lifecycle: lsm.Simple(),
		Attributes: []lsm.AttributeSpec{{Name: "name", Modifier: lsm.ReadWrite, Schema: json.RawMessage(`{"type":"string"}`)}}}}); err != nil {
		t.Fatal(err)
	}
	const a, b = "6f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f", "7f1c1b8e-4e43-4f7a-9a55-0a1b2c3d4e5f"
	write := func(id string, v int64, state string) {
		t.Helper()
		if _, err := st.ApplyInstanceChange(ctx, e.ID, store.InstanceChange{Entity: "vm", ID: id, Version: v, State: state,
			Event: json.RawMessage(`{"trigger": "create"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 1, "start")
	write(b, 1, "start")

	hub := lsmevents.New(st, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { hub.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wait.For(t, "the hub to listen", 10*time.Second, func() error {
		return wait.Unless(hub.Listening(), "not listening")
	})
	subA := hub.Subscribe(a, 1)
	defer subA.Close()
	subB := hub.Subscribe(b, 1)
	defer subB.Close()
	subAhead := hub.Subscribe(a, 2) // delivered version 2 already
	defer subAhead.Close()
	write(a, 2, "acknowledged")
	select {
	case <-subA.C:
	case <-time.After(10 * time.Second):
		t.Fatal("the notification did not wake the instance's subscription")
	}
	// Another transfer of b's, after a's: had a's woken b, b's wake-up
	// would be pending now; b's own write wakes it exactly once.
	write(b, 2, "acknowledged")
	select {
	case <-subB.C:
	case <-time.After(10 * time.Second):
		t.Fatal("b's notification did not wake b")
	}
	select {
	case <-subAhead.C:
		t.Error("a subscription that delivered the version was woken")
	default:
	}
	if n := hub.Subscribers(); n != 3 {
		t.Errorf("subscribers = %d", n)
	}
	subAhead.Close()
	if n := hub.Subscribers(); n != 2 {
		t.Errorf("subscribers after a close = %d", n)
	}
}
