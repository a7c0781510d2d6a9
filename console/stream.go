package console

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// stream serves server-sent events for a page that follows something as
// it changes (a run, a service instance): it calls look (with the request,
// marked routine) at once and then
// every streamPoll, sends its value as an event "progress" whenever its
// JSON changes, "end" once look says it is over, and "failure" (with the
// problem's text) when look fails after the first time. A first failure
// is the page's error. The browser's EventSource reconnects by itself.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, look func(r *http.Request) (v any, over bool, err error)) {
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
