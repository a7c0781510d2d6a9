package api

import (
	"net/http"
	"time"
)

// A client that trickles a request's body holds a connection and a
// goroutine for as long as it likes, unless the read of the body has a
// deadline. The http.Server bounds the headers (ReadHeaderTimeout) but
// has no per-request bound for bodies (its ReadTimeout would be one for
// every request, the 256 MiB exports included), so BodyDeadlines sets one
// on every request that has a body, whatever answers it: an API route, the
// web console, a path that names nothing (whose body net/http reads after
// the answer, to discard it). A route that takes large bodies extends it
// (Route.bulk).
//
// The deadline bounds the body only: net/http lifts it when the body has
// been read to its end (before it watches the connection for the client
// leaving, where a timeout would cancel the request's context), so a
// handler may work longer than the body took, and a server-sent-event
// stream (a GET, no body) never has one (TestBodyDeadlineBoundsTheBodyOnly).

// BodyDeadlines bounds how long the body of each request next serves may
// take to arrive (Options.BodyTimeout). Wrap the outermost handler of the
// http.Server with it; the API's own handler applies it too.
func (s *Server) BodyDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setBodyDeadline(w, r, s.opts.BodyTimeout)
		next.ServeHTTP(w, r)
	})
}

// setBodyDeadline gives r's body timeout from now to arrive, when r has a
// body. A writer without a connection (the console's in-process calls)
// has nothing to hold, and refuses deadlines: that is fine.
func setBodyDeadline(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
}
