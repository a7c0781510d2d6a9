package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/intendhq/intend/api"
)

func TestCheckCallbackURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		allowed []string
		ok      bool
		why     string
	}{
		{"https://hooks.example.com/intend?x=1", nil, true, "any host without a list"},
		{"http://127.0.0.1:8080/hook", nil, true, "loopback without a list (the admin's choice)"},
		{"", nil, false, "required"},
		{"https://example.com/" + strings.Repeat("a", 2048), nil, false, "too long"},
		{"ftp://example.com/", nil, false, "not http"},
		{"javascript:alert(1)", nil, false, "not http"},
		{"//example.com/", nil, false, "no scheme"},
		{"https:///x", nil, false, "no host"},
		{"https://u:p@example.com/", nil, false, "credentials"},
		{"https://u@example.com/", nil, false, "a user"},
		{"https://example.com/#f", nil, false, "a fragment"},
		{"https://example.com/\x00", nil, false, "a control character"},
		{"https://exa mple.com/", nil, false, "a space"},
		{"https://hooks.example.com/", []string{".example.com"}, true, "under an allowed domain"},
		{"https://example.com/", []string{".example.com"}, false, "the domain itself is not under it"},
		{"https://evilexample.com/", []string{".example.com"}, false, "a suffix that is not a subdomain"},
		{"https://HOOKS.example.com./", []string{"hooks.example.com"}, true, "case and a trailing dot"},
		{"http://[::1]:9/", []string{"0:0:0:0:0:0:0:1"}, true, "IPv6 written two ways"},
		{"http://169.254.169.254/latest", []string{"hooks.example.com"}, false, "metadata address not listed"},
	} {
		err := api.CheckCallbackURL(tc.url, tc.allowed)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %q with %v: %v", tc.why, tc.url, tc.allowed, err)
		}
	}
}

// FuzzCheckCallbackURL: the check never panics, and what it accepts is
// an absolute http(s) URL with a host and without credentials or
// fragment, which an allow-list of one other host refuses.
func FuzzCheckCallbackURL(f *testing.F) {
	for _, s := range []string{"https://hooks.example.com/x?y=1", "http://[::1]:80/", "https://u:p@h/", "http://h/#f",
		"file:///etc/passwd", "http://%zz/", "HTTP://H.EXAMPLE.COM./"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if api.CheckCallbackURL(raw, nil) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
			strings.Contains(raw, "#") || len(raw) > 2048 {
			t.Fatalf("accepted %q: %+v, %v", raw, u, err)
		}
		if strings.ToLower(strings.TrimSuffix(u.Hostname(), ".")) != "only.example.org" && api.CheckCallbackURL(raw, []string{"only.example.org"}) == nil {
			t.Fatalf("accepted %q for only.example.org", raw)
		}
	})
}
