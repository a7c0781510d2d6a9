// Package fetchhosts decides which hosts an autonomous compile may fetch
// a git repository from (intend server --compile-fetch-hosts). A repo_url
// is set by an environment's admin, and the server fetches it from its own
// network position: without a rule, an admin could make the server reach
// its loopback services, the cloud metadata address or the private
// network (blind server-side request forgery). The rule is the
// operator's, never an environment's.
//
// A host is allowed when the list names it ("git.example.com",
// ".example.com" for any host under example.com, "*" for any host), or it
// is an address inside an address entry ("10.1.2.3", "10.0.0.0/8"). Then
// every address the host resolves to must be public, or inside an address
// entry: loopback, private, link-local, shared (CGNAT), multicast and
// reserved addresses are refused unless the list holds them. No list is
// "*": any host whose addresses are all public.
package fetchhosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Policy is a parsed list of allowed hosts. The zero value and nil allow
// any host with public addresses only.
type Policy struct {
	anyHost  bool
	names    []string // exact, lower case, without a trailing dot
	suffixes []string // ".example.com"
	nets     []netip.Prefix
	entries  []string // as given, for messages
}

// ErrRefused is wrapped by every refusal of a host or address.
var ErrRefused = errors.New("refused by the server's --compile-fetch-hosts")

// Parse reads the list: host names, ".suffix" names, "*", IP addresses
// and CIDR prefixes. An empty list is the default policy.
func Parse(list []string) (*Policy, error) {
	p := &Policy{}
	for _, e := range list {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case e == "*":
			p.anyHost = true
		case strings.Contains(e, "/"):
			pfx, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("compile fetch host %q: not an address prefix (10.0.0.0/8)", e)
			}
			p.nets = append(p.nets, pfx.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
				a = a.Unmap()
				p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
				break
			}
			name := strings.TrimSuffix(e, ".")
			if !validName(strings.TrimPrefix(name, ".")) {
				return nil, fmt.Errorf("compile fetch host %q: not a host name, .domain, *, address or prefix", e)
			}
			if strings.HasPrefix(name, ".") {
				p.suffixes = append(p.suffixes, name)
			} else {
				p.names = append(p.names, name)
			}
		}
		p.entries = append(p.entries, e)
	}
	if len(p.entries) == 0 {
		return &Policy{anyHost: true}, nil
	}
	return p, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// String is the list as given ("*" for the default).
func (p *Policy) String() string {
	if p == nil || len(p.entries) == 0 {
		return "*"
	}
	return strings.Join(p.entries, ",")
}

// AllowsName reports whether the list allows host by its name (or, for an
// address, by an address entry), without resolving it: what the API can
// tell when a repo_url is set. A fetch checks the addresses too (Resolve).
func (p *Policy) AllowsName(host string) bool {
	if p == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		return p.anyHost || p.inNets(a.Unmap())
	}
	if p.anyHost || slices.Contains(p.names, host) {
		return true
	}
	for _, s := range p.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

func (p *Policy) inNets(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Resolver looks host names up (net.DefaultResolver; tests give their own).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolve checks host against the policy and returns the addresses a
// fetch may connect to: every address the host resolves to, each public
// or inside an address entry (a host that resolves to one refused address
// is refused whole: a client may pick any of them). Its refusals wrap
// ErrRefused.
func (p *Policy) Resolve(ctx context.Context, r Resolver, host string) ([]netip.Addr, error) {
	if !p.AllowsName(host) {
		return nil, fmt.Errorf("host %q is not on the list (%s): %w", host, p, ErrRefused)
	}
	bare := strings.Trim(host, "[]")
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(bare); err == nil {
		addrs = []netip.Addr{a}
	} else {
		if r == nil {
			r = net.DefaultResolver
		}
		addrs, err = r.LookupNetIP(ctx, "ip", bare)
		if err != nil {
			return nil, fmt.Errorf("resolve %q: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %q: no address", host)
		}
	}
	for i, a := range addrs {
		a = a.Unmap()
		addrs[i] = a
		if why := Internal(a); why != "" && (p == nil || !p.inNets(a)) {
			return nil, fmt.Errorf("host %q has the %s address %s, which no address entry of the list (%s) allows: %w",
				host, why, a, p, ErrRefused)
		}
	}
	return addrs, nil
}

// special are the ranges Internal names beyond netip's own tests.
var special = []struct {
	pfx  netip.Prefix
	kind string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "reserved"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "NAT64"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// Internal names the kind of a non-public address ("loopback", "private",
// "link-local" …), or returns "" for a public one.
func Internal(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, s := range special {
		if s.pfx.Contains(a) {
			return s.kind
		}
	}
	return ""
}

// Target is the scheme, host and port a repo_url fetches from; ok is
// false for a local path or file:// URL (no host). The port is the
// scheme's default when the URL names none.
func Target(repoURL string) (scheme, host, port string, ok bool) {
	if i := strings.Index(repoURL, "://"); i > 0 {
		u, err := url.Parse(repoURL)
		if err != nil || u.Scheme == "file" || u.Hostname() == "" {
			return "", "", "", false
		}
		port = u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "ssh": "22", "git": "9418"}[u.Scheme]
		}
		return u.Scheme, u.Hostname(), port, true
	}
	colon, slash := strings.IndexByte(repoURL, ':'), strings.IndexByte(repoURL, '/')
	if colon < 0 || (slash >= 0 && slash < colon) {
		return "", "", "", false // a local path
	}
	// scp-like [user@]host:path, ssh.
	host = repoURL[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	return "ssh", strings.Trim(host, "[]"), "22", true
}
