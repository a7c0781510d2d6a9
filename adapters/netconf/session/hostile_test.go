package session_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/intendhq/intend/adapters/netconf/session"
)

// hostileDevice is an in-process SSH server whose "netconf" subsystem
// plays a broken or hostile device: it sends hello (end-of-message framed)
// and, once the client's hello is in, runs reply. Only the hostile-reply
// tests use it; every other test talks to the real netconfd.
func hostileDevice(t *testing.T, hello string, reply func(w io.Writer)) session.Config {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &gossh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				_, chans, reqs, err := gossh.NewServerConn(nc, cfg)
				if err != nil {
					return
				}
				go gossh.DiscardRequests(reqs)
				for nch := range chans {
					ch, creqs, err := nch.Accept()
					if err != nil {
						return
					}
					go func() {
						for req := range creqs {
							req.Reply(req.Type == "subsystem", nil)
							if req.Type != "subsystem" {
								continue
							}
							go func() {
								defer ch.Close()
								io.WriteString(ch, hello+"]]>]]>")
								r := bufio.NewReader(ch)
								var got []byte
								for !bytes.HasSuffix(got, []byte("]]>]]>")) {
									b, err := r.ReadByte()
									if err != nil {
										return
									}
									got = append(got, b)
								}
								reply(ch)
								<-done
							}()
						}
					}()
				}
			}()
		}
	}()
	return session.Config{Addr: ln.Addr().String(), User: "u", Password: "p",
		HostKey: string(gossh.MarshalAuthorizedKey(signer.PublicKey())), Timeout: 10 * time.Second, MaxReply: 1 << 20,
		// Its answer to the first RPC is the test's.
		NoProbe: true}
}

const (
	hello10   = `<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities><capability>urn:ietf:params:netconf:base:1.0</capability></capabilities><session-id>7</session-id></hello>`
	hello11   = `<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities><capability>urn:ietf:params:netconf:base:1.1</capability></capabilities><session-id>7</session-id></hello>`
	replyOpen = `<rpc-reply message-id="1" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0">`
)

const laughs = `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
`

func write(s string) func(io.Writer) { return func(w io.Writer) { io.WriteString(w, s) } }

// TestHostileReplies: a reply that is huge, malformed, declares entities
// (billion laughs), nests too deep, or answers another message is refused
// within bounded memory and time, and the session is closed after it.
func TestHostileReplies(t *testing.T) {
	deep := replyOpen + "<data>" + strings.Repeat("<a>", 100_000) + strings.Repeat("</a>", 100_000) + "</data></rpc-reply>"
	cases := []struct {
		name   string
		hello  string
		reply  func(io.Writer)
		want   error
		detail string
	}{
		{"huge without end-of-message", hello10, func(w io.Writer) {
			chunk := bytes.Repeat([]byte("<a>x</a>"), 8<<10)
			w.Write([]byte(replyOpen + "<data>"))
			for i := 0; i < 16<<10; i++ { // up to 1 GiB
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, session.ErrHostile, "larger than"},
		{"huge chunk declared", hello11, write("\n#4000000000\n" + replyOpen), session.ErrHostile, "larger than"},
		{"huge in many chunks", hello11, func(w io.Writer) {
			chunk := fmt.Sprintf("\n#%d\n%s", 64<<10, bytes.Repeat([]byte("x"), 64<<10))
			for i := 0; i < 16<<10; i++ {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
		}, session.ErrHostile, "larger than"},
		{"broken chunk header", hello11, write("\n#12x\n"), session.ErrHostile, "chunk"},
		{"chunk size with a leading zero", hello11, write("\n#012\n"), session.ErrHostile, "chunk"},
		{"malformed", hello10, write(replyOpen + "<ok></rpc-reply>]]>]]>"), session.ErrHostile, "well-formed"},
		{"billion laughs", hello10, write(laughs + replyOpen + "<data><x>&lol9;</x></data></rpc-reply>]]>]]>"), session.ErrHostile, "DTD"},
		{"undeclared entity", hello10, write(replyOpen + "<data><x>&lol9;</x></data></rpc-reply>]]>]]>"), session.ErrHostile, "well-formed"},
		{"deep nesting", hello10, write(deep + "]]>]]>"), session.ErrHostile, "deeper than"},
		{"another message-id", hello10, write(`<rpc-reply message-id="2" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><data/></rpc-reply>]]>]]>`), session.ErrProtocol, "message-id"},
		{"not an rpc-reply", hello10, write(`<notification xmlns="urn:ietf:params:xml:ns:netconf:notification:1.0"/>]]>]]>`), session.ErrProtocol, "rpc-reply"},
		{"not UTF-8", hello10, write(`<?xml version="1.0" encoding="ISO-8859-1"?>` + replyOpen + "<data/></rpc-reply>]]>]]>"), session.ErrHostile, "well-formed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := hostileDevice(t, c.hello, c.reply)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sess, err := session.Dial(ctx, cfg)
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			defer sess.Close()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err = sess.GetConfig(ctx, session.Running, nil)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.detail) {
				t.Fatalf("get-config: %v, want %v naming %q", err, c.want, c.detail)
			}
			if took > 10*time.Second {
				t.Errorf("refused after %s", took)
			}
			// The reply is capped at 1 MiB; allow for buffers and the
			// in-process server's own allocations.
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
				t.Errorf("allocated %d MiB refusing it", alloc>>20)
			}
			if sess.Err() == nil {
				t.Errorf("the session is still usable after a hostile reply")
			}
			t.Logf("%v (%s)", err, took)
		})
	}
}

// TestHostileHello: a <hello> with a DTD, or none at all, fails Dial.
func TestHostileHello(t *testing.T) {
	for _, c := range []struct{ name, hello string }{
		{"billion laughs", laughs + hello10},
		{"no capabilities", `<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities/></hello>`},
		{"no base version", `<hello xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><capabilities><capability>urn:x</capability></capabilities></hello>`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := hostileDevice(t, c.hello, write(""))
			_, err := session.Dial(context.Background(), cfg)
			if !errors.Is(err, session.ErrHostile) && !errors.Is(err, session.ErrProtocol) {
				t.Fatalf("Dial: %v, want ErrHostile or ErrProtocol", err)
			}
		})
	}
}

// TestDeadlineClosesSession: a device that never answers costs the RPC its
// context's deadline, no more; the session is then closed as unreachable,
// so a late reply cannot be taken for the next RPC's.
func TestDeadlineClosesSession(t *testing.T) {
	cfg := hostileDevice(t, hello10, write(""))
	sess, err := session.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = sess.Lock(ctx, session.Candidate)
	if !errors.Is(err, session.ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock on a silent device: %v, want ErrUnreachable and DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("returned after %s, the deadline was 300ms", took)
	}
	if err := sess.Unlock(context.Background(), session.Candidate); !errors.Is(err, session.ErrUnreachable) {
		t.Errorf("the next RPC: %v, want the session closed", err)
	}
	// Config.Timeout bounds an RPC whose context has none.
	cfg.Timeout = 500 * time.Millisecond
	sess2, err := session.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sess2.Close()
	if err := sess2.Validate(context.Background(), session.Candidate); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("validate without a deadline on a silent device: %v", err)
	}
}
