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

// Front wraps a handler the server serves beside the API (the web
// console) in the API's own front door: the allowed-hosts check (a page
// served under an attacker's name is as much a rebinding target as the
// API) and HSTS over TLS.
func (s *Server) Front(next http.Handler) http.Handler { return hsts(s.checkHost(next)) }

// HSTSHeader is what a response over TLS says of the server's host:
// browsers use https only for a year, so that a network attacker cannot
// downgrade a later visit (the console's cookies, a token typed in).
// Without includeSubDomains: other hosts of the domain are not intend's
// to decide for.
const HSTSHeader = "max-age=31536000"

// hsts sets Strict-Transport-Security on responses over TLS. (Behind a
// proxy that ends TLS, the request is plain HTTP here: the proxy sets it.)
func hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", HSTSHeader)
		}
		next.ServeHTTP(w, r)
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
