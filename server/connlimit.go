package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// DefaultMaxConnsPerClient is how many connections one client address
// may hold open to the API at once (intend server --max-conns-per-client).
// A browser opens six per host, the CLI and an executor a few; thousands
// are an attack (slow clients holding connections).
const DefaultMaxConnsPerClient = 128

// limitListener closes, at accept, a connection from a client that holds
// max open already. A client is its IP address, an IPv6 one its /64 (what
// one host is usually given). The limit is per server replica.
//
// Closing at once, before TLS or HTTP, costs the server nothing: answering
// 429 would mean reading the request, which is what a slow client makes
// expensive.
type limitListener struct {
	net.Listener
	max int
	log *slog.Logger

	mu   sync.Mutex
	open map[string]int
	// warned is when a refusal was last logged (one line a minute at
	// most: a flood would otherwise be a flood of log lines).
	warned time.Time
}

func newLimitListener(ln net.Listener, max int, log *slog.Logger) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: max, log: log, open: map[string]int{}}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := clientKey(c.RemoteAddr())
		l.mu.Lock()
		if l.open[key] >= l.max {
			warn := time.Since(l.warned) > time.Minute
			if warn {
				l.warned = time.Now()
			}
			l.mu.Unlock()
			_ = c.Close()
			if warn {
				l.log.Warn("connection refused: the client holds the most connections it may (--max-conns-per-client)",
					"remote", key, "max_conns_per_client", l.max)
			}
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, l: l, key: key}, nil
	}
}

func (l *limitListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// clientKey names the client of a connection: its IP, an IPv6 address's
// /64.
func clientKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return (&net.IPNet{IP: ta.IP.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// limitedConn gives its client's slot back when it is closed (once).
type limitedConn struct {
	net.Conn
	l    *limitListener
	key  string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// CloseWrite half-closes the connection as net/http does before closing
// one it answered with an error (the client then reads the answer).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
