package api

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/intendhq/intend/internal/ledger"
)

// decodeRecords decodes the body of POST .../actions as Decode does, the
// problems included. Executors send a chunk of records on every batch's
// every hundred resources, and encoding/json's reflection over them was
// the largest part of the executor API's CPU (issue 28). A body of the
// shape executors send is read by jsonCursor, which checks the JSON
// grammar as it goes (one pass, where encoding/json makes two and
// reflects); any other body, and any value jsonCursor does not read
// exactly as encoding/json would, goes to the strict decoder, which
// answers the problem. FuzzDecodeRecords holds the two to the same
// answer.
func decodeRecords(body []byte, req *RecordRequest) error {
	c := jsonCursor{b: body}
	if c.recordRequest(req) && c.end() {
		return bodyTextProblems(body)
	}
	*req = RecordRequest{}
	return decodeJSON(body, req)
}

// decodeIntents is decodeRecords for POST .../intents.
func decodeIntents(body []byte, req *IntentsRequest) error {
	c := jsonCursor{b: body}
	if c.intentsRequest(req) && c.end() {
		return bodyTextProblems(body)
	}
	*req = IntentsRequest{}
	return decodeJSON(body, req)
}

// bodyTextProblems are the checks decodeJSON makes of a body it decoded.
func bodyTextProblems(body []byte) error {
	if p := textProblem(body); p != nil {
		return p
	}
	if p := numberProblem(body); p != nil {
		return p
	}
	return nil
}

// jsonCursor reads a JSON body, checking its grammar as encoding/json's
// scanner does. Each reader returns false on anything it does not read
// as encoding/json (with DisallowUnknownFields and UseNumber) reads it:
// invalid JSON, a key of another case, seen twice or escaped, a null, a
// value of another type, a number beyond the field, nesting deeper than
// maxRawDepth. The caller then decodes the body the strict way.
type jsonCursor struct {
	b []byte
	i int
}

func (c *jsonCursor) ws() {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

// eat consumes ch (after white space) if it is next.
func (c *jsonCursor) eat(ch byte) bool {
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (c *jsonCursor) end() bool {
	c.ws()
	return c.i == len(c.b)
}

// stringToken returns the next value if it is a string, quotes included,
// and whether it needs unescaping (a backslash or a byte beyond ASCII,
// which encoding/json may replace).
func (c *jsonCursor) stringToken() (tok []byte, plain, ok bool) {
	c.ws()
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil, false, false
	}
	start := c.i
	plain = true
	for c.i++; c.i < len(c.b); c.i++ {
		switch ch := c.b[c.i]; {
		case ch == '"':
			c.i++
			return c.b[start:c.i], plain, true
		case ch == '\\':
			plain = false
			c.i++
			if c.i >= len(c.b) {
				return nil, false, false
			}
			switch c.b[c.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(c.b)-c.i < 5 || !isHex(c.b[c.i+1]) || !isHex(c.b[c.i+2]) || !isHex(c.b[c.i+3]) || !isHex(c.b[c.i+4]) {
					return nil, false, false
				}
				c.i += 4
			default:
				return nil, false, false
			}
		case ch < 0x20:
			return nil, false, false
		case ch >= 0x80:
			plain = false
		}
	}
	return nil, false, false
}

// str reads a string value.
func (c *jsonCursor) str() (string, bool) {
	tok, plain, ok := c.stringToken()
	if !ok {
		return "", false
	}
	if plain {
		return string(tok[1 : len(tok)-1]), true
	}
	var s string
	return s, json.Unmarshal(tok, &s) == nil
}

// integer reads a number that fits an int64, as a whole number.
func (c *jsonCursor) integer() (int64, bool) {
	c.ws()
	start := c.i
	for c.i < len(c.b) && (c.b[c.i] == '-' || c.b[c.i] >= '0' && c.b[c.i] <= '9') {
		c.i++
	}
	if c.i == start || c.i < len(c.b) && (c.b[c.i] == '.' || c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		return 0, false
	}
	digits := c.b[start:c.i]
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 {
		return 0, false // not a JSON number
	}
	n, err := strconv.ParseInt(string(c.b[start:c.i]), 10, 64)
	return n, err == nil
}

// boolean reads true or false.
func (c *jsonCursor) boolean() (bool, bool) {
	c.ws()
	switch {
	case len(c.b)-c.i >= 4 && string(c.b[c.i:c.i+4]) == "true":
		c.i += 4
		return true, true
	case len(c.b)-c.i >= 5 && string(c.b[c.i:c.i+5]) == "false":
		c.i += 5
		return false, true
	}
	return false, false
}

// maxRawDepth bounds the nesting jsonCursor.raw checks itself; deeper
// values go to encoding/json (which refuses beyond 10,000).
const maxRawDepth = 64

// raw reads any value, as json.RawMessage keeps it: its bytes, copied.
func (c *jsonCursor) raw() (json.RawMessage, bool) {
	c.ws()
	start := c.i
	if !c.skip(0) {
		return nil, false
	}
	return append(json.RawMessage(nil), c.b[start:c.i]...), true
}

// skip reads any value, checking its grammar.
func (c *jsonCursor) skip(depth int) bool {
	c.ws()
	if c.i >= len(c.b) || depth > maxRawDepth {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '"':
		_, _, ok := c.stringToken()
		return ok
	case ch == '{':
		return c.object(func([]byte) (uint64, bool) { return 0, c.skip(depth + 1) })
	case ch == '[':
		return c.array(func() bool { return c.skip(depth + 1) })
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(c.b)-c.i >= len(lit) && string(c.b[c.i:c.i+len(lit)]) == lit {
			c.i += len(lit)
			return true
		}
	}
	return false
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (c *jsonCursor) number() bool {
	digits := func() int {
		n := 0
		for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.i < len(c.b) && c.b[c.i] == '-' {
		c.i++
	}
	switch {
	case c.i < len(c.b) && c.b[c.i] == '0':
		c.i++
	case digits() == 0:
		return false
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return false
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// isHex reports whether ch is a hexadecimal digit.
func isHex(ch byte) bool {
	return ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'f' || ch >= 'A' && ch <= 'F'
}

// object reads an object, calling field with each key (plain text only)
// to read its value; seen, one bit per known key, refuses a key twice.
func (c *jsonCursor) object(field func(key []byte) (bit uint64, ok bool)) bool {
	if !c.eat('{') {
		return false
	}
	if c.eat('}') {
		return true
	}
	var seen uint64
	for {
		tok, plain, ok := c.stringToken()
		if !ok || !plain || !c.eat(':') {
			return false
		}
		bit, ok := field(tok[1 : len(tok)-1])
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		if c.eat(',') {
			continue
		}
		return c.eat('}')
	}
}

// array reads an array (not null), calling elem for each element.
func (c *jsonCursor) array(elem func() bool) bool {
	if !c.eat('[') {
		return false
	}
	if c.eat(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if c.eat(',') {
			continue
		}
		return c.eat(']')
	}
}

func (c *jsonCursor) recordRequest(req *RecordRequest) bool {
	return c.object(func(key []byte) (uint64, bool) {
		switch string(key) {
		case "records":
			req.Records = []ledger.ActionRecord{}
			return 1, c.array(func() bool {
				req.Records = append(req.Records, ledger.ActionRecord{})
				return c.record(&req.Records[len(req.Records)-1])
			})
		case "again":
			var ok bool
			req.Again, ok = c.boolean()
			return 2, ok
		}
		return 0, false
	})
}

func (c *jsonCursor) record(r *ledger.ActionRecord) bool {
	return c.object(func(key []byte) (uint64, bool) {
		var ok bool
		switch string(key) {
		case "resource_id":
			r.ResourceID, ok = c.str()
			return 1 << 0, ok
		case "hash":
			if c.eatNull() {
				r.Hash = nil
				return 1 << 1, true
			}
			tok, plain, ok := c.stringToken()
			if !ok || !plain {
				return 0, false
			}
			// As encoding/json decodes a []byte.
			s := tok[1 : len(tok)-1]
			b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
			n, err := base64.StdEncoding.Decode(b, s)
			r.Hash = b[:n]
			return 1 << 1, err == nil
		case "version":
			r.Version, ok = c.integer()
			return 1 << 2, ok
		case "action":
			var s string
			s, ok = c.str()
			r.Action = ledger.Action(s)
			return 1 << 3, ok
		case "reason":
			r.Reason, ok = c.str()
			return 1 << 4, ok
		case "started_at":
			return 1 << 5, c.time(&r.StartedAt)
		case "finished_at":
			return 1 << 6, c.time(&r.FinishedAt)
		case "result":
			var s string
			s, ok = c.str()
			r.Result = ledger.Result(s)
			return 1 << 7, ok
		case "operation":
			r.Operation, ok = c.str()
			return 1 << 8, ok
		case "changed":
			r.Changed, ok = c.boolean()
			return 1 << 9, ok
		case "changes":
			r.Changes, ok = c.raw()
			return 1 << 10, ok
		case "logs":
			r.Logs, ok = c.raw()
			return 1 << 11, ok
		case "facts":
			return 1 << 12, c.facts(&r.Facts)
		case "error":
			r.Error, ok = c.str()
			return 1 << 13, ok
		case "error_class":
			r.ErrorClass, ok = c.str()
			return 1 << 14, ok
		case "workflow_id":
			r.WorkflowID, ok = c.str()
			return 1 << 15, ok
		case "run_id":
			r.RunID, ok = c.str()
			return 1 << 16, ok
		case "attempt":
			var n int64
			n, ok = c.integer()
			r.Attempt = int(n)
			return 1 << 17, ok
		case "executor":
			r.Executor, ok = c.str()
			return 1 << 18, ok
		}
		return 0, false
	})
}

// eatNull consumes a null if it is next.
func (c *jsonCursor) eatNull() bool {
	c.ws()
	if len(c.b)-c.i >= 4 && string(c.b[c.i:c.i+4]) == "null" {
		c.i += 4
		return true
	}
	return false
}

// time reads a string with time.Time's own decoder, as encoding/json does.
func (c *jsonCursor) time(t interface{ UnmarshalJSON([]byte) error }) bool {
	tok, _, ok := c.stringToken()
	return ok && t.UnmarshalJSON(tok) == nil
}

// facts reads {"name": value, …} (null: no facts), as encoding/json
// decodes a map[string]json.RawMessage: the last of a name twice wins.
func (c *jsonCursor) facts(m *map[string]json.RawMessage) bool {
	if c.eatNull() {
		*m = nil
		return true
	}
	if !c.eat('{') {
		return false
	}
	if *m == nil {
		*m = map[string]json.RawMessage{}
	}
	if c.eat('}') {
		return true
	}
	for {
		k, ok := c.str()
		if !ok || !c.eat(':') {
			return false
		}
		if (*m)[k], ok = c.raw(); !ok {
			return false
		}
		if c.eat(',') {
			continue
		}
		return c.eat('}')
	}
}

func (c *jsonCursor) intentsRequest(req *IntentsRequest) bool {
	return c.object(func(key []byte) (uint64, bool) {
		if string(key) != "intents" {
			return 0, false
		}
		req.Intents = []ledger.Intent{}
		return 1, c.array(func() bool {
			req.Intents = append(req.Intents, ledger.Intent{})
			in := &req.Intents[len(req.Intents)-1]
			return c.object(func(key []byte) (uint64, bool) {
				var ok bool
				switch string(key) {
				case "resource_id":
					in.ResourceID, ok = c.str()
					return 1, ok
				case "operation":
					in.Operation, ok = c.str()
					return 2, ok
				case "workflow_id":
					in.WorkflowID, ok = c.str()
					return 4, ok
				case "attempt":
					var n int64
					n, ok = c.integer()
					in.Attempt = int(n)
					return 8, ok
				}
				return 0, false
			})
		})
	})
}
