package api

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
)

// checkHost refuses a request whose Host is not one the server serves
// (Options.AllowedHosts), with 421. A browser tricked into sending a
// request to intend under another name (DNS rebinding) names that other
// host; the bearer token a write needs is never sent by a browser on its
// own, and this keeps even reads of an unauthenticated route from
// reaching such a page. /healthz answers whatever the Host, for probes
// that address the server by IP.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if len(s.opts.AllowedHosts) == 0 {
		return next
	}
	allowed := make([]string, len(s.opts.AllowedHosts))
	for i, h := range s.opts.AllowedHosts {
		allowed[i] = strings.ToLower(strings.Trim(h, "[]"))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || hostAllowed(r.Host, allowed) || OverLocalSocket(r.Context()) {
			next.ServeHTTP(w, r)
			return
		}
		WriteProblem(w, r, Misdirected("this server does not serve host %q (see intend server --allowed-hosts)",
			truncate(r.Host, 128)))
	})
}

func hostAllowed(host string, allowed []string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	return slices.Contains(allowed, host) || slices.Contains(allowed, "*")
}

// LoopbackHosts are the names a server listening on loopback answers to
// by default.
var LoopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

type localSocketKey struct{}

// LocalSocket marks ctx as a connection's to the server's own Unix socket,
// the one its embedded executors call it over (it is an http.Server's
// ConnContext). No browser reaches that socket, so the Host check does
// not apply, and the executors registered over it are the embedded ones.
func LocalSocket(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, localSocketKey{}, true)
}

// OverLocalSocket reports whether ctx is a request's that came over the
// server's own Unix socket (LocalSocket).
func OverLocalSocket(ctx context.Context) bool {
	v, _ := ctx.Value(localSocketKey{}).(bool)
	return v
}
