package session_test

import (
	"context"
	"errors"
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

// TestValidationError: a value the YANG type refuses comes back as an
// RPCError with the device's error-path and error-message.
func TestValidationError(t *testing.T) {
	sess := dial(t, netconftest.Shared(t))
	ctx := ctxT(t)
	name := ifName(t)
	bad := []byte(`<interfaces xmlns="` + ifNS + `"><interface><name>` + name + `</name>` +
		`<type xmlns:ianaift="urn:ietf:params:xml:ns:yang:iana-if-type">ianaift:ethernetCsmacd</type>` +
		`<enabled>maybe</enabled></interface></interfaces>`)
	err := sess.EditConfig(ctx, session.Candidate, bad, session.EditOptions{})
	var es session.RPCErrors
	if !errors.As(err, &es) {
		t.Fatalf("edit-config with enabled=maybe: %v, want RPCErrors", err)
	}
	var e session.RPCError
	if !errors.As(err, &e) || e.Path == "" || e.Message == "" || e.Tag == "" || e.Type == "" || e.Severity != "error" {
		t.Fatalf("RPCError %+v lacks path, message, tag, type or severity", e)
	}
	if !strings.Contains(e.Path, "enabled") || !strings.Contains(err.Error(), e.Path) || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("error %q (path %q) does not name the leaf, or its text lacks path and message", err, e.Path)
	}
	if session.IsLockDenied(err) || errors.Is(err, session.ErrUnreachable) {
		t.Errorf("a validation error is taken for lock-denied or unreachable: %v", err)
	}
	// The session goes on.
	if err := sess.DiscardChanges(ctx); err != nil {
		t.Fatalf("discard-changes after the error: %v", err)
	}
	t.Logf("device error: %v (info %q)", err, e.Info)
}

// TestLockDenied: a lock held by another session is refused recognisably,
// and can be taken once released.
func TestLockDenied(t *testing.T) {
	s := netconftest.Shared(t)
	a, b := dial(t, s), dial(t, s)
	ctx := ctxT(t)
	if err := a.Lock(ctx, session.Candidate); err != nil {
		t.Fatalf("lock by a: %v", err)
	}
	err := b.Lock(ctx, session.Candidate)
	if !session.IsLockDenied(err) {
		t.Fatalf("lock by b while a holds it: %v, want lock-denied", err)
	}
	var e session.RPCError
	if !errors.As(err, &e) || e.Tag != "lock-denied" {
		t.Errorf("lock-denied RPCError = %+v", e)
	}
	if err := a.Unlock(ctx, session.Candidate); err != nil {
		t.Fatalf("unlock by a: %v", err)
	}
	if err := b.Lock(ctx, session.Candidate); err != nil {
		t.Fatalf("lock by b after a released it: %v", err)
	}
	if err := b.Unlock(ctx, session.Candidate); err != nil {
		t.Fatal(err)
	}
}

// waitRunning polls running until it has the interface (or has not) or
// the deadline. It polls slowly: netconfd checks a confirmed commit's
// timeout only once it has been idle for a while, and a session asking
// every 100 ms keeps the rollback from ever happening.
func waitRunning(t *testing.T, sess *session.Session, name string, has bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		data, err := sess.GetConfig(ctxT(t), session.Running, ifFilter(name))
		if err != nil {
			t.Fatalf("get-config: %v", err)
		}
		if strings.Contains(string(data), name) == has {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("interface %s in running = %v after %s, want %v:\n%s", name, !has, within, has, data)
		}
		time.Sleep(1500 * time.Millisecond)
	}
}

// TestConfirmedCommit: a confirmed commit that is not confirmed rolls back
// by itself after its timeout; one that is confirmed stays; one cancelled
// rolls back at once.
func TestConfirmedCommit(t *testing.T) {
	s := netconftest.Shared(t)
	sess := dial(t, s)
	ctx := ctxT(t)
	lost, kept, cancelled := ifName(t), ifName(t), ifName(t)

	if err := sess.EditConfig(ctx, session.Candidate, iface(lost, "rolls back"), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := sess.Commit(ctx, session.CommitOptions{Confirmed: true, Timeout: time.Second}); err != nil {
		t.Fatalf("confirmed commit: %v", err)
	}
	waitRunning(t, sess, lost, true, 0)
	waitRunning(t, sess, lost, false, 15*time.Second)
	if time.Since(start) < time.Second {
		t.Errorf("rolled back after %s, before the 1s timeout", time.Since(start))
	}

	if err := sess.EditConfig(ctx, session.Candidate, iface(kept, "confirmed"), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Commit(ctx, session.CommitOptions{Confirmed: true, Timeout: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Commit(ctx, session.CommitOptions{}); err != nil {
		t.Fatalf("confirming commit: %v", err)
	}
	time.Sleep(3 * time.Second) // past the timeout: still there
	waitRunning(t, sess, kept, true, 0)

	if err := sess.EditConfig(ctx, session.Candidate, iface(cancelled, "cancelled"), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Commit(ctx, session.CommitOptions{Confirmed: true, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, sess, cancelled, true, 0)
	if err := sess.CancelCommit(ctx); err != nil {
		t.Fatalf("cancel-commit: %v", err)
	}
	waitRunning(t, sess, cancelled, false, 5*time.Second)
}

// TestDiscardChangesAndValidate: discard-changes reverts the candidate;
// validate passes on a valid candidate.
func TestDiscardChangesAndValidate(t *testing.T) {
	sess := dial(t, netconftest.Shared(t))
	ctx := ctxT(t)
	name := ifName(t)
	if err := sess.EditConfig(ctx, session.Candidate, iface(name, "discarded"), session.EditOptions{TestOption: "set"}); err != nil {
		t.Fatal(err)
	}
	if err := sess.Validate(ctx, session.Candidate); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if data, _ := sess.GetConfig(ctx, session.Candidate, ifFilter(name)); !strings.Contains(string(data), name) {
		t.Fatalf("candidate lacks the edit:\n%s", data)
	}
	if err := sess.DiscardChanges(ctx); err != nil {
		t.Fatalf("discard-changes: %v", err)
	}
	if data, err := sess.GetConfig(ctx, session.Candidate, ifFilter(name)); err != nil || strings.Contains(string(data), name) {
		t.Fatalf("candidate after discard-changes: %s %v", data, err)
	}
	if err := sess.EditConfig(ctx, session.Candidate, iface(name, "x"), session.EditOptions{DefaultOperation: "merge; <x/>"}); err == nil {
		t.Errorf("a default-operation outside the protocol's values was sent")
	}
	if err := sess.EditConfig(ctx, session.Candidate, []byte(`</config><discard-changes/><config>`), session.EditOptions{}); err == nil {
		t.Errorf("configuration XML that closes <config> was sent")
	}
}

// TestDeviceGoesAway: netconfd killed under an open session, or the SSH
// connection cut, makes the next RPC fail as unreachable, and Err says so;
// dialling a device whose NETCONF server is gone is unreachable too.
func TestDeviceGoesAway(t *testing.T) {
	t.Run("netconfd killed", func(t *testing.T) {
		s := netconftest.Start(t)
		sess := dial(t, s)
		s.Kill(t)
		_, err := sess.GetConfig(ctxT(t), session.Running, nil)
		if !errors.Is(err, session.ErrUnreachable) {
			t.Fatalf("get-config with netconfd dead: %v, want ErrUnreachable", err)
		}
		if !errors.Is(sess.Err(), session.ErrUnreachable) {
			t.Errorf("Err = %v", sess.Err())
		}
		_, err = session.Dial(ctxT(t), config(s))
		if !errors.Is(err, session.ErrUnreachable) {
			t.Errorf("Dial with netconfd dead: %v, want ErrUnreachable", err)
		}
	})
	t.Run("connection cut", func(t *testing.T) {
		s := netconftest.Start(t)
		sess := dial(t, s)
		if s.SSH.KillConnections(t) == 0 {
			t.Fatal("no connection to kill")
		}
		err := sess.Lock(ctxT(t), session.Candidate)
		if !errors.Is(err, session.ErrUnreachable) {
			t.Fatalf("lock on a cut connection: %v, want ErrUnreachable", err)
		}
		s.SSH.Stop()
		_, err = session.Dial(ctxT(t), config(s))
		if !errors.Is(err, session.ErrUnreachable) {
			t.Errorf("Dial with sshd gone: %v, want ErrUnreachable", err)
		}
	})
}

// TestHostKeyChecked: a device presenting another key is refused, and the
// refusal is not "unreachable" (retrying will not help); no key at all is
// refused before connecting. A fingerprint pins the key too.
func TestHostKeyChecked(t *testing.T) {
	s := netconftest.Shared(t)
	_, other := netconftestKey(t)
	c := config(s)
	c.HostKey = other
	_, err := session.Dial(ctxT(t), c)
	if err == nil || errors.Is(err, session.ErrUnreachable) || !strings.Contains(err.Error(), "host key") {
		t.Errorf("Dial with the wrong host key: %v", err)
	}
	c.HostKey = ""
	if _, err := session.Dial(ctxT(t), c); err == nil || !strings.Contains(err.Error(), "host key is required") {
		t.Errorf("Dial without a host key: %v", err)
	}
	c.HostKey = fingerprint(t, s.HostKey)
	sess, err := session.Dial(ctxT(t), c)
	if err != nil {
		t.Fatalf("Dial with the host key's fingerprint: %v", err)
	}
	sess.Close()
	if err := sess.Lock(ctxT(t), session.Candidate); !errors.Is(err, session.ErrClosed) {
		t.Errorf("Lock after Close: %v, want ErrClosed", err)
	}
}

// TestPersistedConfirmedCommit: a confirmed commit made with persist
// survives its session and is confirmed from another one by persist-id.
func TestPersistedConfirmedCommit(t *testing.T) {
	s := netconftest.Shared(t)
	a := dial(t, s)
	ctx := ctxT(t)
	name := ifName(t)
	if err := a.EditConfig(ctx, session.Candidate, iface(name, "persisted"), session.EditOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, session.CommitOptions{Confirmed: true, Timeout: 3 * time.Second, Persist: "p-" + name}); err != nil {
		t.Fatalf("confirmed commit with persist: %v", err)
	}
	a.Close()
	b := dial(t, s)
	if err := b.Commit(ctx, session.CommitOptions{PersistID: "p-" + name}); err != nil {
		t.Fatalf("confirming by persist-id from another session: %v", err)
	}
	time.Sleep(4 * time.Second) // past the timeout, idle: still there
	waitRunning(t, b, name, true, 0)
}
