package session

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzParseReply: any message parses or fails without panicking, and a
// failure is a protocol or hostile-reply error.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`<rpc-reply message-id="1" xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><ok/></rpc-reply>`,
		`<nc:rpc-reply message-id="3" xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0" xmlns:if="urn:x"><nc:data><if:a/><b xmlns="urn:y">t</b></nc:data></nc:rpc-reply>`,
		`<rpc-reply xmlns="urn:ietf:params:xml:ns:netconf:base:1.0"><rpc-error><error-type>application</error-type><error-tag>invalid-value</error-tag>` +
			`<error-severity>error</error-severity><error-path>/a</error-path><error-message xml:lang="en">bad</error-message><error-info><x/></error-info></rpc-error></rpc-reply>`,
		`<!DOCTYPE x [<!ENTITY a "b">]><rpc-reply/>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := parseReply(msg, 32)
		if err != nil {
			if !errors.Is(err, ErrHostile) && !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is neither ErrHostile nor ErrProtocol", err)
			}
			return
		}
		if r.data != nil {
			if _, err := parseReply(append(append([]byte(`<rpc-reply xmlns="`+baseNS+`"><data>`), r.data...), "</data></rpc-reply>"...), 40); err != nil {
				t.Fatalf("the <data> returned does not parse again: %v\n%s", err, r.data)
			}
		}
	})
}

// FuzzFraming: any byte stream yields messages within the cap, an error,
// or EOF, in both framings, without panicking.
func FuzzFraming(f *testing.F) {
	f.Add([]byte("\n#3\nabc\n#1\nd\n##\n"), true)
	f.Add([]byte("<a/>]]>]]><b/>]]>]]>"), false)
	f.Add([]byte("\n#99999999999\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, chunked bool) {
		fr := newFramer(bytes.NewReader(in), io.Discard, 64)
		fr.chunked = chunked
		for i := 0; i < 100; i++ {
			msg, err := fr.read()
			if err != nil {
				return
			}
			if len(msg) > 64 {
				t.Fatalf("a message of %d bytes passed a 64-byte cap", len(msg))
			}
		}
	})
}
