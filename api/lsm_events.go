package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// An instance's transfers as server-sent events (issue 14, B.9): GET
// .../service_inventory/{entity}/{id}/events streams one event per version
// of the instance's log, then the live ones, and ends after the instance
// reaches a terminal state. Streams hold no database connection while
// idle: the server's lsmevents.Hub wakes them (PostgreSQL LISTEN/NOTIFY,
// with a fallback poll).

// Defaults of the event streams.
const (
	// DefaultMaxEventStreams bounds the streams one server serves at once.
	DefaultMaxEventStreams = 1000
	// DefaultMaxEventStreamsPerCaller bounds the streams one caller
	// holds at once.
	DefaultMaxEventStreamsPerCaller = 16
	// DefaultEventHeartbeat is how often an idle stream sends a comment,
	// so that proxies and clients see it alive.
	DefaultEventHeartbeat = 15 * time.Second
	// eventWriteGrace is how long one write to a stream may take: the
	// http.Server's WriteTimeout is pushed back by it before every write,
	// so a stream outlives the timeout and a client that stopped reading
	// is dropped.
	eventWriteGrace = 30 * time.Second
	// eventBatch is how many log entries one read of the log takes.
	eventBatch = 100
)

// TransferEventName is the SSE event name of a transfer.
const TransferEventName = client.TransferEventName

// TransferEvent is the data of one transfer event: a version of the
// instance's log, as GET .../log shows it, flattened with what caused it
// (client.TransferEvent).
type TransferEvent = client.TransferEvent

// loggedEvent is the event column of the instance's log.
type loggedEvent struct {
	Trigger    string          `json:"trigger"`
	Source     string          `json:"source"`
	Target     string          `json:"target"`
	Error      bool            `json:"error"`
	Operations json.RawMessage `json:"operations"`
	Request    string          `json:"request"`
	Actor      string          `json:"actor"`
	Reason     string          `json:"reason"`
}

// transferEvent makes a log entry an event.
func transferEvent(instanceID string, e store.InstanceLogEntry, lc *lsm.Lifecycle) TransferEvent {
	var le loggedEvent
	_ = json.Unmarshal(e.Event, &le) // a row written by intend; a bad one shows its state only
	ops := le.Operations
	if len(ops) == 0 || string(ops) == "null" {
		ops = json.RawMessage(`[]`)
	}
	return TransferEvent{
		InstanceID: instanceID, Version: e.Version, Source: le.Source, Target: e.State, Trigger: le.Trigger,
		Error: le.Error, Operations: ops, Actor: le.Actor, Request: le.Request, Reason: le.Reason,
		AttributeSets: wireSets(e.Sets), Errors: e.Errors, Terminal: lc.States[e.State].Terminal, Timestamp: e.CreatedAt,
	}
}

// eventsAfter is the version a stream starts after: the Last-Event-ID
// header (a reconnecting client), else ?after=N, else the version before
// the current one (the current version is sent as a snapshot).
func eventsAfter(r *http.Request, current int64) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, InvalidField("Last-Event-ID", "must be the id of an event of this stream (a version: a whole number from 0)")
		}
		return n, nil
	}
	if _, ok := r.URL.Query()["after"]; ok {
		n, err := queryInt(r, "after", 0, 0, math.MaxInt)
		if err != nil {
			return 0, err
		}
		return int64(n), nil
	}
	return max(current-1, 0), nil
}

// streamInstanceEvents serves GET .../service_inventory/{entity}/{id}/events.
func (s *Server) streamInstanceEvents(w http.ResponseWriter, r *http.Request) error {
	env, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	after, err := eventsAfter(r, inst.Version)
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), env.ID, inst.Entity)
	if err != nil {
		return err
	}
	if s.opts.Events == nil {
		return Unavailable("this server serves no event streams")
	}
	// One caller may not hold every stream: its own are bounded first
	// (429: it is its own doing), then the server's (503).
	caller := principal(r).Actor()
	releaseCaller, ok := s.callerStreams.acquire(caller, s.opts.MaxEventStreamsPerCaller)
	if !ok {
		w.Header().Set("Retry-After", "5")
		return TooManyRequests("%s holds %d event streams already, the most one caller may; "+
			"close one, or poll GET .../log", caller, s.opts.MaxEventStreamsPerCaller)
	}
	defer releaseCaller()
	if n := s.streams.Add(1); n > int64(s.opts.MaxEventStreams) {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		return Unavailable(fmt.Sprintf("this server serves %d event streams at once; retry shortly, or poll GET .../log",
			s.opts.MaxEventStreams))
	}
	defer s.streams.Add(-1)
	sub := s.opts.Events.Subscribe(inst.ID, after)
	defer sub.Close()

	st := &eventStream{w: w, rc: http.NewResponseController(w)}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// The retry hint: a reconnecting EventSource waits 2 s.
	if err := st.write([]byte("retry: 2000\n\n")); err != nil {
		return nil
	}
	heartbeat := time.NewTicker(s.opts.EventHeartbeat)
	defer heartbeat.Stop()
	ctx := r.Context()
	for {
		ended, sent, err := s.sendEvents(ctx, st, env, inst.ID, &ent, &after)
		if err != nil {
			if ctx.Err() == nil && !st.broken {
				s.log.WarnContext(r.Context(), "service instance events: stream ended", "environment", env.Name,
					"service_instance", inst.ID, "error", err)
			}
			return nil // the headers are out: the stream just ends
		}
		sub.Seen(after)
		if ended {
			return nil
		}
		if sent == eventBatch {
			continue // more to catch up with
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Done():
			return nil // the server shuts down; the client reconnects with Last-Event-ID
		case <-sub.C:
		case <-heartbeat.C:
			if err := st.write([]byte(": heartbeat\n\n")); err != nil {
				return nil
			}
		}
	}
}

// sendEvents sends the log entries after *after (at most eventBatch),
// moving *after on; ended is true when the stream has nothing more to
// send (a terminal version was sent, or is the instance's newest).
func (s *Server) sendEvents(ctx context.Context, st *eventStream, env store.Environment, instanceID string,
	ent *store.ServiceEntity, after *int64) (ended bool, sent int, err error) {
	entries, err := s.opts.Store.InstanceLogAfter(ctx, env.ID, instanceID, *after, eventBatch)
	if err != nil {
		return false, 0, err
	}
	if len(entries) == 0 {
		// Nothing after: a stream of a terminated instance whose client
		// has seen its end ends at once.
		inst, err := s.opts.Store.GetInstance(ctx, env.ID, "", instanceID)
		if err != nil {
			return false, 0, err
		}
		return inst.Deleted && inst.Version <= *after, 0, nil
	}
	for i, e := range entries {
		ev := transferEvent(instanceID, e, &ent.Lifecycle)
		if i == len(entries)-1 {
			if sd, err := s.opts.Store.ResourceSetDeploy(ctx, env.ID, ent.Name+"/"+instanceID, time.Time{}); err == nil {
				ev.Deployment = &Deployment{Total: sd.Total, Deployed: sd.Deployed, Failed: sd.Failed}
			}
		}
		data, err := json.Marshal(ev)
		if err != nil {
			return false, sent, err
		}
		msg := fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Version, TransferEventName, data)
		if err := st.write(msg); err != nil {
			return false, sent, err
		}
		*after = e.Version
		sent++
		if ev.Terminal {
			return true, sent, nil
		}
	}
	return false, sent, nil
}

// eventStream writes a stream's messages, each flushed, each with its
// own write deadline.
type eventStream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// broken: a write failed (the client left).
	broken bool
}

func (st *eventStream) write(b []byte) error {
	// The server's WriteTimeout counts from the request's start: push it
	// back before every write (a writer that cannot set deadlines is not
	// bound by one either).
	_ = st.rc.SetWriteDeadline(time.Now().Add(eventWriteGrace))
	if _, err := st.w.Write(b); err != nil {
		st.broken = true
		return err
	}
	if err := st.rc.Flush(); err != nil {
		st.broken = true
		return err
	}
	return nil
}
