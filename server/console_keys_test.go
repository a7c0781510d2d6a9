package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/intendhq/intend/server"
	"github.com/intendhq/intend/server/servertest"
)

// TestConsoleKeysFromConfig: replicas given the same console key
// (--console-key-file) take each other's forms without sharing it in
// PostgreSQL (here each has a database of its own); the old key, listed
// second during a rotation, is still taken; a replica with another key
// refuses the form as stale.
func TestConsoleKeysFromConfig(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte("o"), 32), bytes.Repeat([]byte("n"), 32)
	_, a, _ := servertest.StartServer(t, server.Config{ConsoleKeys: [][]byte{oldKey}})
	_, b, _ := servertest.StartServer(t, server.Config{ConsoleKeys: [][]byte{newKey, oldKey}})
	_, other, _ := servertest.StartServer(t, server.Config{})

	// The sign-in form of a: its pre-session cookie and token.
	resp, err := http.Get(a.URL() + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil || len(resp.Cookies()) == 0 {
		t.Fatalf("the sign-in page of a: %s %v", page, resp.Cookies())
	}
	signIn := func(s *server.Server) (int, string) {
		form := url.Values{"token": {servertest.AdminToken}, "csrf": {string(m[1])}}
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/console/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for _, ck := range resp.Cookies() {
			req.AddCookie(ck)
		}
		r, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		body, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(body)
	}
	if code, body := signIn(b); code != http.StatusSeeOther {
		t.Errorf("a's form posted to b (old key still listed): %d %.300s", code, body)
	}
	if code, body := signIn(other); code != http.StatusForbidden || !strings.Contains(body, "stale") {
		t.Errorf("a's form posted to a replica of another key: %d %.300s", code, body)
	}
}
