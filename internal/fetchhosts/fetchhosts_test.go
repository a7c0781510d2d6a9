package fetchhosts

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// fakeDNS resolves the names it holds.
type fakeDNS map[string][]string

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range f[host] {
		out = append(out, netip.MustParseAddr(s))
	}
	if out == nil {
		return nil, errors.New("no such host")
	}
	return out, nil
}

var dns = fakeDNS{
	"github.com":          {"140.82.121.3"},
	"git.example.com":     {"93.184.215.14"},
	"rebind.attacker.com": {"169.254.169.254"},
	"half.attacker.com":   {"93.184.215.14", "10.0.0.5"},
	"mapped.attacker.com": {"::ffff:127.0.0.1"},
	"gitlab.internal":     {"10.20.0.7"},
	"localhost":           {"127.0.0.1", "::1"},
	"v6.example.com":      {"2a00:1450:4001:80b::200e"},
	"nat64.attacker.com":  {"64:ff9b::a9fe:a9fe"},
}

func TestResolve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		list []string
		host string
		ok   bool
		why  string
	}{
		{nil, "github.com", true, "the default: a public host"},
		{nil, "v6.example.com", true, "the default: a public IPv6 host"},
		{nil, "127.0.0.1", false, "the default: loopback"},
		{nil, "localhost", false, "the default: a name of loopback"},
		{nil, "169.254.169.254", false, "the default: the cloud metadata address"},
		{nil, "rebind.attacker.com", false, "a public-looking name of a link-local address"},
		{nil, "half.attacker.com", false, "one private address among public ones"},
		{nil, "mapped.attacker.com", false, "IPv4-mapped loopback"},
		{nil, "nat64.attacker.com", false, "NAT64 of the metadata address"},
		{nil, "[::1]", false, "IPv6 loopback"},
		{nil, "10.1.2.3", false, "private"},
		{nil, "100.64.1.1", false, "shared address space"},
		{nil, "0.0.0.0", false, "unspecified"},
		{nil, "fe80::1", false, "IPv6 link-local"},
		{nil, "fd00::1", false, "IPv6 unique local"},
		{nil, "no.such.host", false, "does not resolve"},
		{[]string{"github.com"}, "github.com", true, "listed"},
		{[]string{"github.com"}, "git.example.com", false, "a list is an allowlist"},
		{[]string{".example.com"}, "git.example.com", true, "a listed domain"},
		{[]string{".example.com"}, "example.com.evil.org", false, "a suffix is a suffix"},
		{[]string{"gitlab.internal"}, "gitlab.internal", false, "a listed name of a private address still needs the address listed"},
		{[]string{"gitlab.internal", "10.20.0.0/16"}, "gitlab.internal", true, "name and range listed"},
		{[]string{"10.20.0.0/16"}, "gitlab.internal", false, "the range alone does not list the name"},
		{[]string{"10.20.0.0/16"}, "10.20.0.7", true, "an address in a listed range"},
		{[]string{"127.0.0.1"}, "127.0.0.1", true, "loopback allowed explicitly (tests)"},
		{[]string{"127.0.0.1"}, "localhost", false, "not listed by name"},
		{[]string{"*", "127.0.0.1"}, "localhost", false, "localhost also resolves to ::1"},
		{[]string{"*", "127.0.0.1", "::1"}, "localhost", true, "both its addresses listed"},
		{[]string{"*"}, "github.com", true, "any public host"},
		{[]string{"*"}, "rebind.attacker.com", false, "any public host, not internal ones"},
	} {
		p, err := Parse(tc.list)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := p.Resolve(context.Background(), dns, tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("%v: Resolve(%q) = %v, %v; %s", tc.list, tc.host, addrs, err, tc.why)
		}
		if err == nil && len(addrs) == 0 {
			t.Errorf("%v: Resolve(%q) allowed no address", tc.list, tc.host)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	p, err := Parse([]string{" GitHub.com. ", ".Example.com", "10.0.0.0/8", "::1", "*", ""})
	if err != nil || p.String() != "github.com.,.example.com,10.0.0.0/8,::1,*" || !p.AllowsName("GITHUB.COM") {
		t.Errorf("Parse = %v, %v", p, err)
	}
	if p, err := Parse(nil); err != nil || p.String() != "*" || !p.AllowsName("anything.example") {
		t.Errorf("the default: %v, %v", p, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "http://x", "a b", "-x.com", "x..com", "ex@mple.com"} {
		if _, err := Parse([]string{bad}); err == nil || !strings.Contains(err.Error(), "compile fetch host") {
			t.Errorf("Parse(%q) = %v, want refused", bad, err)
		}
	}
}

func TestTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url                string
		scheme, host, port string
		ok                 bool
	}{
		{"https://github.com/o/r.git", "https", "github.com", "443", true},
		{"https://git.example.com:8443/r", "https", "git.example.com", "8443", true},
		{"ssh://git@[::1]:2222/r", "ssh", "::1", "2222", true},
		{"git://10.0.0.1/r", "git", "10.0.0.1", "9418", true},
		{"git@github.com:o/r.git", "ssh", "github.com", "22", true},
		{"/srv/git/r.git", "", "", "", false},
		{"file:///srv/git/r.git", "", "", "", false},
	} {
		s, h, p, ok := Target(tc.url)
		if got := []string{s, h, p}; !slices.Equal(got, []string{tc.scheme, tc.host, tc.port}) || ok != tc.ok {
			t.Errorf("Target(%q) = %v %v", tc.url, got, ok)
		}
	}
}
