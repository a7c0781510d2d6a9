package session_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intendhq/intend/adapters/netconf/session"
	"github.com/intendhq/intend/internal/netconftest"
)

func TestMain(m *testing.M) { netconftest.Main(m) }

const ifNS = "urn:ietf:params:xml:ns:yang:ietf-interfaces"

func config(s *netconftest.Server) session.Config {
	return session.Config{Addr: s.Addr, User: s.User, PrivateKey: s.PrivateKey, HostKey: s.HostKey, Timeout: 20 * time.Second}
}

func dial(t *testing.T, s *netconftest.Server) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := session.Dial(ctx, config(s))
	if err != nil {
		t.Fatalf("Dial: %v\n%s", err, s.Log())
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

var ifCount atomic.Int64

// ifName is an interface name of the test's own on the shared server.
func ifName(t *testing.T) string {
	return fmt.Sprintf("t%d-%d", time.Now().UnixNano()%1e6, ifCount.Add(1))
}

func iface(name, description string) []byte {
	return []byte(`<interfaces xmlns="` + ifNS + `"><interface><name>` + name + `</name>` +
		`<type xmlns:ianaift="urn:ietf:params:xml:ns:yang:iana-if-type">ianaift:ethernetCsmacd</type>` +
		`<description>` + description + `</description></interface></interfaces>`)
}

func ifFilter(name string) []byte {
	return []byte(`<interfaces xmlns="` + ifNS + `"><interface><name>` + name + `</name></interface></interfaces>`)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// commitIface creates an interface in running through the candidate.
func commitIface(t *testing.T, sess *session.Session, name, description string) {
	t.Helper()
	ctx := ctxT(t)
	if err := sess.EditConfig(ctx, session.Candidate, iface(name, description), session.EditOptions{}); err != nil {
		t.Fatalf("edit-config: %v", err)
	}
	if err := sess.Commit(ctx, session.CommitOptions{}); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// TestHello: the device's capabilities are read from its <hello>, and the
// short names match them.
func TestHello(t *testing.T) {
	s := netconftest.Shared(t)
	sess := dial(t, s)
	for _, c := range []string{":base:1.1", ":candidate", ":confirmed-commit:1.1", ":confirmed-commit", ":validate", ":validate:1.1",
		"urn:ietf:params:xml:ns:yang:ietf-interfaces", "urn:ietf:params:netconf:capability:candidate:1.0"} {
		if !sess.Has(c) {
			t.Errorf("Has(%q) = false; capabilities: %v", c, sess.Capabilities())
		}
	}
	for _, c := range []string{":startup", ":confirmed-commit:2.0", ":cand", "urn:ietf:params:xml:ns:yang:ietf-interfaces?module"} {
		if sess.Has(c) {
			t.Errorf("Has(%q) = true", c)
		}
	}
	if sess.SessionID() == "" {
		t.Errorf("no session-id")
	}
	if err := sess.Err(); err != nil {
		t.Errorf("Err of a live session: %v", err)
	}
}

// TestEditCommitGetConfig: an interface edited into the candidate and
// committed is in running; a subtree filter returns that interface alone,
// with its namespace.
func TestEditCommitGetConfig(t *testing.T) {
	s := netconftest.Shared(t)
	sess := dial(t, s)
	ctx := ctxT(t)
	a, b := ifName(t), ifName(t)
	if err := sess.Lock(ctx, session.Candidate); err != nil {
		t.Fatalf("lock: %v", err)
	}
	commitIface(t, sess, a, "uplink "+a)
	commitIface(t, sess, b, "other")
	if err := sess.Unlock(ctx, session.Candidate); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	data, err := sess.GetConfig(ctx, session.Running, ifFilter(a))
	if err != nil {
		t.Fatalf("get-config: %v", err)
	}
	got := string(data)
	if !strings.Contains(got, "<description>uplink "+a+"</description>") || !strings.Contains(got, `xmlns="`+ifNS+`"`) {
		t.Errorf("get-config running filtered to %s:\n%s", a, got)
	}
	if strings.Contains(got, b) {
		t.Errorf("the filter for %s let %s through:\n%s", a, b, got)
	}
	all, err := sess.GetConfig(ctx, session.Running, nil)
	if err != nil || !strings.Contains(string(all), a) || !strings.Contains(string(all), b) {
		t.Errorf("get-config running unfiltered: %v\n%s", err, all)
	}
	// Delete one: gone from running.
	del := []byte(`<interfaces xmlns="` + ifNS + `"><interface xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0" nc:operation="delete"><name>` + b + `</name></interface></interfaces>`)
	if err := sess.EditConfig(ctx, session.Candidate, del, session.EditOptions{DefaultOperation: "none", ErrorOption: "rollback-on-error", TestOption: "test-then-set"}); err != nil {
		t.Fatalf("edit-config delete: %v", err)
	}
	if err := sess.Commit(ctx, session.CommitOptions{}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if data, err := sess.GetConfig(ctx, session.Running, ifFilter(b)); err != nil || strings.Contains(string(data), b) {
		t.Errorf("after delete, get-config = %s, %v", data, err)
	}
}
