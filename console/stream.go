package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/intendhq/intend/internal/telemetry"
)

// streamPoll is how often a page's event stream looks at what it follows
// (in process, one small API call); the browser only listens.
const streamPoll = 500 * time.Millisecond

// streamWriteGrace bounds one write of a stream to a slow browser.
const streamWriteGrace = 10 * time.Second

// maxStreams bounds the event streams one server serves at once.
const maxStreams = 256

var streams = make(chan struct{}, maxStreams)

// DefaultMaxStreamsPerCaller bounds the event streams one caller holds
// at once, so that one token cannot take all maxStreams.
const DefaultMaxStreamsPerCaller = 16

// callerStreams counts the streams of each caller (its actor).
type callerStreams struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire takes one of actor's limit streams; release gives it back.
func (cs *callerStreams) acquire(actor string, limit int) (release func(), ok bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.n[actor] >= limit {
		return nil, false
	}
	if cs.n == nil {
		cs.n = map[string]int{}
	}
	cs.n[actor]++
	return func() {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.n[actor]--; cs.n[actor] <= 0 {
			delete(cs.n, actor)
		}
	}, true
}

// stream serves server-sent events for a page that follows something as
// it changes (a run, a service instance): it calls look (with the request,
// marked routine) at once and then
// every streamPoll, sends its value as an event "progress" whenever its
// JSON changes, "end" once look says it is over, and "failure" (with the
// problem's text) when look fails after the first time. A first failure
// is the page's error. The browser's EventSource reconnects by itself.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, look func(r *http.Request) (v any, over bool, err error)) {
	// A caller's own streams are bounded first (429: its own doing), then
	// the server's (503).
	limit := c.opts.MaxStreamsPerCaller
	if limit <= 0 {
		limit = DefaultMaxStreamsPerCaller
	}
	release, ok := c.callerStreams.acquire(userOf(r).whoami.Actor, limit)
	if !ok {
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("you have %d live pages open on this server, the most one user may; close one, or reload later", limit),
			http.StatusTooManyRequests)
		return
	}
	defer release()
	select {
	case streams <- struct{}{}:
		defer func() { <-streams }()
	default:
		http.Error(w, "too many live pages open on this server; reload later", http.StatusServiceUnavailable)
		return
	}
	// The polls are routine calls: the access log writes them at debug.
	r = r.WithContext(telemetry.Routine(r.Context()))
	v, over, err := look(r)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	rc := http.NewResponseController(w)
	// Each write gets its own deadline: the server's write timeout is
	// for whole answers, and a stream outlives it.
	flush := func() error {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteGrace))
		return rc.Flush()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	t := time.NewTicker(streamPoll)
	defer t.Stop()
	var last []byte
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(streamWriteGrace))
		if b, _ := json.Marshal(v); string(b) != string(last) {
			fmt.Fprintf(w, "event: progress\ndata: %s\n\n", b)
			last = b
		}
		if over {
			fmt.Fprint(w, "event: end\ndata: {}\n\n")
			_ = flush()
			return
		}
		if err := flush(); err != nil {
			return // the browser left
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		if v, over, err = look(r); err != nil {
			fmt.Fprintf(w, "event: failure\ndata: %q\n\n", problemText(err))
			_ = flush()
			return
		}
	}
}
