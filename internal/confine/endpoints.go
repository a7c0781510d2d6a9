package confine

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The built-in types that reach an API or a device over the network: a
// rest::Object sends HTTP requests to its endpoint, a netconf::Config
// opens an SSH connection to its address. Named here rather than
// imported, as the adapters' own packages are not this one's to import
// (adapters/rest.ObjectType, adapters/netconf.ConfigType).
const (
	restType    = "rest::Object"
	netconfType = "netconf::Config"
)

// restPaths are the attributes of a rest::Object that hold a URL path
// appended to its endpoint (JSON pointers below the attributes): with a
// dot segment, a path would climb out of the endpoint's prefix on a
// server that resolves it.
var restPaths = [][]string{{"path"}, {"collection"}, {"search", "path"}, {"search", "item"},
	{"create", "path"}, {"update", "path"}, {"delete", "path"}}

// maxEndpoint bounds one entry of allowed_endpoints, and an endpoint
// checked against them, in bytes.
const maxEndpoint = 2048

// defaultNETCONFPort is the port of a device whose address names none
// (RFC 6242), as adapters/netconf has it.
const defaultNETCONFPort = 830

// endpoint is a URL as the checks compare it.
type endpoint struct {
	scheme string // http, https or netconf
	host   string // lower case, as written (never resolved)
	port   int    // explicit: 80, 443 or 830 when the URL names none
	path   string // escaped, without a trailing "/"; "" for the root
}

// checkREST checks a rest::Object: its endpoint within the allowed
// endpoints, and no URL path of it climbing out of the endpoint.
func (r Rules) checkREST(attrs map[string]any) *Refusal {
	if v, ok := attrs["endpoint"]; ok {
		s, ok := v.(string)
		if !ok {
			return &Refusal{Attribute: "endpoint", Reason: fmt.Sprintf("attribute \"endpoint\" is not a plain string, so it "+
				"cannot be checked against the environment's %s %s", EndpointsSetting, list(r.Endpoints))}
		}
		e, err := parseEndpoint(s)
		if err == nil && e.scheme == "netconf" {
			err = errors.New("is not an http:// or https:// URL")
		}
		if err != nil {
			return &Refusal{Attribute: "endpoint", Reason: fmt.Sprintf("endpoint %.200q %v, so it cannot be checked against "+
				"the environment's %s %s (an http:// or https:// URL without user, query, fragment or dot segment)",
				s, err, EndpointsSetting, list(r.Endpoints))}
		}
		if !r.allows(e) {
			return &Refusal{Attribute: "endpoint", Reason: fmt.Sprintf("endpoint %.200s is outside the environment's %s %s%s",
				s, EndpointsSetting, list(r.Endpoints), r.noneListed())}
		}
	}
	for _, ptr := range restPaths {
		v, ok := lookup(attrs, ptr)
		if !ok {
			continue
		}
		a := strings.Join(ptr, "/")
		s, ok := v.(string)
		if !ok {
			return &Refusal{Attribute: a, Reason: fmt.Sprintf("attribute %q is not a plain string, so it cannot be checked "+
				"against the environment's %s %s", a, EndpointsSetting, list(r.Endpoints))}
		}
		if dotSegment(s) {
			return &Refusal{Attribute: a, Reason: fmt.Sprintf("%s %.200q holds a \".\" or \"..\" segment (plain or "+
				"percent-encoded): with the environment's %s set, a URL path may not climb out of its endpoint", a, s,
				EndpointsSetting)}
		}
	}
	return nil
}

// checkDevice checks a netconf::Config's address, host[:port], read as
// adapters/netconf reads it.
func (r Rules) checkDevice(v any) *Refusal {
	s, ok := v.(string)
	if !ok {
		return &Refusal{Attribute: "address", Reason: fmt.Sprintf("attribute \"address\" is not a plain string, so it "+
			"cannot be checked against the environment's %s %s", EndpointsSetting, list(r.Endpoints))}
	}
	host, port, err := parseDevice(s)
	if err != nil {
		return &Refusal{Attribute: "address", Reason: fmt.Sprintf("address %.200q is not a host name or address with an "+
			"optional port, so it cannot be checked against the environment's %s %s", s, EndpointsSetting, list(r.Endpoints))}
	}
	if !r.allows(endpoint{scheme: "netconf", host: host, port: port}) {
		return &Refusal{Attribute: "address", Reason: fmt.Sprintf("address %.200s is outside the environment's %s %s%s",
			s, EndpointsSetting, list(r.Endpoints), r.noneListed())}
	}
	return nil
}

// allows reports whether e is within one of the allowed endpoints: the
// same scheme, host and port, and its path the entry's or below it at a
// "/".
func (r Rules) allows(e endpoint) bool {
	for _, s := range r.Endpoints {
		a, err := parseEndpoint(s)
		if err != nil || a.scheme != e.scheme || a.host != e.host || a.port != e.port {
			continue
		}
		if a.path == "" || e.path == a.path || strings.HasPrefix(e.path, a.path+"/") {
			return true
		}
	}
	return false
}

// noneListed says, when no endpoint is allowed, why.
func (r Rules) noneListed() string {
	if len(r.Endpoints) > 0 {
		return ""
	}
	return " (a confined environment reaches no API or device its global admin has not listed)"
}

// parseEndpoint reads an entry of allowed_endpoints, or a rest::Object's
// endpoint: scheme://host[:port][/path], the scheme http, https or
// netconf (no path), without user, query, fragment or dot segment.
func parseEndpoint(s string) (endpoint, error) {
	if len(s) > maxEndpoint {
		return endpoint{}, fmt.Errorf("is longer than %d bytes", maxEndpoint)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return endpoint{}, errors.New("holds a space, a control character or a backslash")
	}
	u, err := url.Parse(s)
	if err != nil {
		return endpoint{}, errors.New("does not parse as a URL")
	}
	var e endpoint
	switch e.scheme = u.Scheme; {
	case u.Opaque != "" || u.Host == "" || (e.scheme != "http" && e.scheme != "https" && e.scheme != "netconf"):
		return endpoint{}, errors.New("is not an http:// or https:// URL, nor netconf://host[:port]")
	case u.User != nil:
		return endpoint{}, errors.New("holds a user")
	case u.RawQuery != "" || u.ForceQuery:
		return endpoint{}, errors.New("holds a query")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return endpoint{}, errors.New("holds a fragment")
	}
	if e.host = strings.ToLower(u.Hostname()); e.host == "" {
		return endpoint{}, errors.New("names no host")
	}
	switch p := u.Port(); {
	case p != "":
		if e.port, err = strconv.Atoi(p); err != nil || e.port < 1 || e.port > 65535 {
			return endpoint{}, fmt.Errorf("has port %s, not from 1 to 65535", p)
		}
	case e.scheme == "http":
		e.port = 80
	case e.scheme == "https":
		e.port = 443
	default:
		e.port = defaultNETCONFPort
	}
	if e.path = u.EscapedPath(); dotSegment(e.path) {
		return endpoint{}, errors.New(`holds a "." or ".." segment`)
	}
	e.path = strings.TrimRight(e.path, "/")
	if e.scheme == "netconf" {
		if e.path != "" || strings.HasSuffix(s, "/") {
			return endpoint{}, errors.New("has a path (a netconf:// endpoint is netconf://host[:port])")
		}
		if !deviceHost(e.host) {
			return endpoint{}, errors.New("names no host name or IP address")
		}
	}
	return e, nil
}

// parseDevice reads a netconf::Config's address as adapters/netconf
// does: host:port, or a host alone (an IPv6 address bracketed or not)
// on port 830.
func parseDevice(a string) (string, int, error) {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"), strconv.Itoa(defaultNETCONFPort)
	}
	n, err := strconv.Atoi(port)
	if !deviceHost(host) || err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", 0, errors.New("not host[:port]")
	}
	return strings.ToLower(host), n, nil
}

// deviceHost reports whether h is a host name or an IPv6 address, as
// adapters/netconf accepts them (an IPv4 address is a name of digits and
// dots).
func deviceHost(h string) bool {
	name := h != "" && !strings.ContainsFunc(h, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	})
	return name || strings.Contains(h, ":") && net.ParseIP(h) != nil
}

// dotSegment reports whether the URL path p holds a "." or ".." segment
// as some server may read it: percent-encoded ("%2e"), separated by an
// encoded slash or a backslash, or followed by parameters ("..;x").
func dotSegment(p string) bool {
	p = strings.NewReplacer("%2e", ".", "%2f", "/", "%5c", "/", `\`, "/").Replace(strings.ToLower(p))
	for seg := range strings.SplitSeq(p, "/") {
		if i := strings.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// lookup returns the value at ptr below attrs (objects only).
func lookup(attrs map[string]any, ptr []string) (any, bool) {
	var v any = attrs
	for _, k := range ptr {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// CheckEndpointEntry validates one entry of allowed_endpoints: an
// http:// or https:// URL prefix (scheme, host, optional port and path)
// or netconf://host[:port], without user, query, fragment or dot
// segment, at most 2048 bytes.
func CheckEndpointEntry(s string) error {
	if _, err := parseEndpoint(s); err != nil {
		return fmt.Errorf("%.80q %w", s, err)
	}
	return nil
}
