package session

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// baseNS is the namespace of NETCONF's own elements.
const baseNS = "urn:ietf:params:xml:ns:netconf:base:1.0"

// decoder is an XML decoder for untrusted input: strict, UTF-8 only, no
// entities beyond XML's five, and every token checked by next.
type decoder struct {
	d        *xml.Decoder
	depth    int
	maxDepth int
	// prev is the input offset before the last token: where it starts.
	prev int64
}

func newDecoder(b []byte, maxDepth int) *decoder {
	d := xml.NewDecoder(bytes.NewReader(b))
	d.Strict = true
	// No CharsetReader: an encoding other than UTF-8 is an error. No
	// Entity map: a reference to an entity XML does not predefine is an
	// error, so entity expansion (billion laughs) cannot happen.
	return &decoder{d: d, maxDepth: maxDepth}
}

// next returns the next token (a copy), refusing DTDs, entity
// declarations and nesting deeper than maxDepth. io.EOF ends the input.
func (x *decoder) next() (xml.Token, error) {
	x.prev = x.d.InputOffset()
	tok, err := x.d.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("%w: not well-formed XML: %v", ErrHostile, err)
	}
	switch t := tok.(type) {
	case xml.Directive:
		return nil, fmt.Errorf("%w: it holds a DTD or declaration (%.40q), which NETCONF does not allow", ErrHostile, "<!"+string(t))
	case xml.StartElement:
		x.depth++
		if x.depth > x.maxDepth {
			return nil, fmt.Errorf("%w: elements nested deeper than %d", ErrHostile, x.maxDepth)
		}
	case xml.EndElement:
		x.depth--
	}
	return xml.CopyToken(tok), nil
}

// offset is the input offset after the last token.
func (x *decoder) offset() int64 { return x.d.InputOffset() }

// checkFragment checks that b is well-formed XML content (elements, text)
// that closes every element it opens, so it cannot break out of the
// element it is put in.
func checkFragment(what string, b []byte) error {
	x := newDecoder(append(append([]byte("<f>"), b...), "</f>"...), MaxDepth+1)
	for {
		tok, err := x.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, errors.Unwrap(err))
		}
		if _, ok := tok.(xml.ProcInst); ok {
			return fmt.Errorf("%s: a processing instruction is not allowed", what)
		}
		if x.depth == 0 {
			if _, ok := tok.(xml.EndElement); ok {
				if _, err := x.next(); err != io.EOF {
					return fmt.Errorf("%s: closes an element it did not open", what)
				}
				return nil
			}
		}
	}
}

// nsDecls are namespace declarations: prefix ("" for the default) -> URI.
type nsDecls map[string]string

func (n nsDecls) add(attrs []xml.Attr) {
	for _, a := range attrs {
		switch {
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			n[""] = a.Value
		case a.Name.Space == "xmlns":
			n[a.Name.Local] = a.Value
		}
	}
}

// capture records the raw content of one element and where its children
// start, to return it with the namespace declarations it inherits.
type capture struct {
	start, end int64
	inherited  nsDecls
	children   []child
}

type child struct {
	at       int64
	declared nsDecls
}

// inner returns the captured content of src, each top-level element given
// the declarations it inherited and does not make itself, so the content
// means the same on its own.
func (c *capture) inner(src []byte) []byte {
	if c == nil || c.end < c.start {
		return nil
	}
	var out bytes.Buffer
	last := c.start
	for _, ch := range c.children {
		// src[ch.at] is '<'; the element's name runs to a space, '/' or '>'.
		nameEnd := ch.at + 1
		for nameEnd < c.end && !strings.ContainsRune(" \t\r\n/>", rune(src[nameEnd])) {
			nameEnd++
		}
		out.Write(src[last:nameEnd])
		for _, p := range sortedKeys(c.inherited) {
			if _, own := ch.declared[p]; own {
				continue
			}
			if p == "" {
				fmt.Fprintf(&out, ` xmlns="%s"`, escapeAttr(c.inherited[p]))
			} else {
				fmt.Fprintf(&out, ` xmlns:%s="%s"`, p, escapeAttr(c.inherited[p]))
			}
		}
		last = nameEnd
	}
	out.Write(src[last:c.end])
	return out.Bytes()
}

func sortedKeys(m nsDecls) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

func escapeAttr(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return strings.ReplaceAll(b.String(), `"`, "&#34;")
}

func escapeText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// reply is a parsed <rpc-reply>.
type reply struct {
	messageID string
	ok        bool
	data      []byte // inner XML of <data>; nil when there is none
	body      []byte // inner XML of <rpc-reply>
	errs      RPCErrors
	warnings  RPCErrors
}

// parseReply parses one message that must be an <rpc-reply>.
func parseReply(msg []byte, maxDepth int) (*reply, error) {
	x := newDecoder(msg, maxDepth)
	r := &reply{}
	var (
		body, data *capture
		decls      = nsDecls{}
		cur        *RPCError
		field      *string
		text       strings.Builder
		infoStart  int64
		seenRoot   bool
	)
	for {
		tok, err := x.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch x.depth {
			case 1:
				if seenRoot {
					return nil, fmt.Errorf("%w: more than one root element", ErrHostile)
				}
				seenRoot = true
				if t.Name.Space != baseNS || t.Name.Local != "rpc-reply" {
					return nil, fmt.Errorf("%w: <%s> (namespace %q) where <rpc-reply> was expected", ErrProtocol, t.Name.Local, t.Name.Space)
				}
				for _, a := range t.Attr {
					if a.Name.Local == "message-id" && (a.Name.Space == "" || a.Name.Space == baseNS) {
						r.messageID = a.Value
					}
				}
				decls.add(t.Attr)
				body = &capture{start: x.offset(), inherited: copyDecls(decls)}
			case 2:
				own := nsDecls{}
				own.add(t.Attr)
				body.children = append(body.children, child{at: x.prev, declared: own})
				if t.Name.Space != baseNS {
					continue
				}
				switch t.Name.Local {
				case "ok":
					r.ok = true
				case "data":
					inh := copyDecls(decls)
					inh.add(t.Attr)
					data = &capture{start: x.offset(), inherited: inh}
				case "rpc-error":
					cur = &RPCError{}
				}
			case 3:
				if data != nil && data.end == 0 {
					own := nsDecls{}
					own.add(t.Attr)
					data.children = append(data.children, child{at: x.prev, declared: own})
				}
				if cur == nil || t.Name.Space != baseNS {
					continue
				}
				text.Reset()
				switch t.Name.Local {
				case "error-type":
					field = &cur.Type
				case "error-tag":
					field = &cur.Tag
				case "error-severity":
					field = &cur.Severity
				case "error-app-tag":
					field = &cur.AppTag
				case "error-path":
					field = &cur.Path
				case "error-message":
					field = &cur.Message
				case "error-info":
					infoStart = x.offset()
				}
			}
		case xml.CharData:
			if field != nil && x.depth == 3 {
				text.Write(t)
			}
		case xml.EndElement:
			switch x.depth {
			case 0:
				body.end = x.prev
			case 1:
				if t.Name.Space != baseNS {
					continue
				}
				switch {
				case t.Name.Local == "data" && data != nil && data.end == 0:
					data.end = x.prev
				case t.Name.Local == "rpc-error" && cur != nil:
					if cur.Severity == "warning" {
						r.warnings = append(r.warnings, *cur)
					} else {
						r.errs = append(r.errs, *cur)
					}
					cur = nil
				}
			case 2:
				if cur == nil {
					continue
				}
				if field != nil {
					*field = strings.TrimSpace(text.String())
					field = nil
				}
				if t.Name.Space == baseNS && t.Name.Local == "error-info" {
					cur.Info = strings.TrimSpace(string(msg[infoStart:x.prev]))
				}
			}
		}
	}
	if !seenRoot {
		return nil, fmt.Errorf("%w: an empty message", ErrProtocol)
	}
	r.body = body.inner(msg)
	if data != nil {
		r.data = data.inner(msg)
		if r.data == nil {
			r.data = []byte{}
		}
	}
	return r, nil
}

func copyDecls(n nsDecls) nsDecls {
	c := make(nsDecls, len(n))
	for k, v := range n {
		c[k] = v
	}
	return c
}

// hello is a parsed <hello>.
type hello struct {
	capabilities []string
	sessionID    string
}

// parseHello parses the device's <hello>.
func parseHello(msg []byte, maxDepth int) (*hello, error) {
	x := newDecoder(msg, maxDepth)
	h := &hello{}
	var text strings.Builder
	inText := false
	for {
		tok, err := x.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if x.depth == 1 && (t.Name.Space != baseNS || t.Name.Local != "hello") {
				return nil, fmt.Errorf("%w: <%s> (namespace %q) where <hello> was expected", ErrProtocol, t.Name.Local, t.Name.Space)
			}
			inText = t.Name.Space == baseNS && (x.depth == 3 && t.Name.Local == "capability" || x.depth == 2 && t.Name.Local == "session-id")
			text.Reset()
		case xml.CharData:
			if inText {
				text.Write(t)
			}
		case xml.EndElement:
			if inText {
				v := strings.TrimSpace(text.String())
				if t.Name.Local == "capability" {
					h.capabilities = append(h.capabilities, v)
				} else {
					h.sessionID = v
				}
			}
			inText = false
		}
	}
	if len(h.capabilities) == 0 {
		return nil, fmt.Errorf("%w: the device's <hello> has no capabilities", ErrProtocol)
	}
	return h, nil
}
