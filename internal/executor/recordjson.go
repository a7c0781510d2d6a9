package executor

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/intendhq/intend/internal/ledger"
)

// appendRecord appends rec as json.Marshal encodes it, byte for byte,
// without reflection: an executor encodes every attempt it records, and
// json.Marshal was 0.13 s of intend's P1-P5 profile (issue 28). A record
// holding a value this writer does not encode itself (a string to
// escape, raw JSON to compact or escape) is encoded by json.Marshal.
// TestAppendRecordAsMarshal and FuzzAppendRecord hold the two to the
// same bytes.
func appendRecord(dst []byte, rec *ledger.ActionRecord) ([]byte, error) {
	if out, ok := appendRecordFast(dst, rec); ok {
		return out, nil
	}
	b, err := json.Marshal(rec)
	return append(dst[:len(dst):len(dst)], b...), err
}

func appendRecordFast(b []byte, r *ledger.ActionRecord) ([]byte, bool) {
	ok := true
	str := func(key, s string) {
		b = append(b, key...)
		if !plainString(s) {
			ok = false
			return
		}
		b = append(append(append(b, '"'), s...), '"')
	}
	raw := func(key string, v json.RawMessage) {
		b = append(b, key...)
		if !plainRaw(v) {
			ok = false
			return
		}
		b = append(b, v...)
	}
	tm := func(key string, t interface{ MarshalJSON() ([]byte, error) }) {
		b = append(b, key...)
		j, err := t.MarshalJSON()
		if err != nil {
			ok = false
			return
		}
		b = append(b, j...)
	}
	str(`{"resource_id":`, r.ResourceID)
	b = append(b, `,"hash":`...)
	if r.Hash == nil {
		b = append(b, "null"...)
	} else {
		b = append(base64.StdEncoding.AppendEncode(append(b, '"'), r.Hash), '"')
	}
	b = strconv.AppendInt(append(b, `,"version":`...), r.Version, 10)
	str(`,"action":`, string(r.Action))
	str(`,"reason":`, r.Reason)
	tm(`,"started_at":`, r.StartedAt)
	tm(`,"finished_at":`, r.FinishedAt)
	str(`,"result":`, string(r.Result))
	if r.Operation != "" {
		str(`,"operation":`, r.Operation)
	}
	if r.Changed {
		b = append(b, `,"changed":true`...)
	}
	if len(r.Changes) > 0 {
		raw(`,"changes":`, r.Changes)
	}
	if len(r.Logs) > 0 {
		raw(`,"logs":`, r.Logs)
	}
	if len(r.Facts) > 0 {
		b = append(b, `,"facts":{`...)
		keys := make([]string, 0, len(r.Facts))
		for k := range r.Facts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			sep := `,`
			if i == 0 {
				sep = ``
			}
			str(sep, k)
			raw(`:`, r.Facts[k])
		}
		b = append(b, '}')
	}
	if r.Error != "" {
		str(`,"error":`, r.Error)
	}
	if r.ErrorClass != "" {
		str(`,"error_class":`, r.ErrorClass)
	}
	str(`,"workflow_id":`, r.WorkflowID)
	str(`,"run_id":`, r.RunID)
	b = strconv.AppendInt(append(b, `,"attempt":`...), int64(r.Attempt), 10)
	if r.Executor != "" {
		str(`,"executor":`, r.Executor)
	}
	return append(b, '}'), ok
}

// plainString reports whether json.Marshal writes s as it is, quoted:
// printable ASCII without the characters it escapes.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainRaw reports whether json.Marshal writes the raw JSON v as it is:
// valid, printable ASCII, with no white space to compact (outside its
// strings) and nothing it escapes.
func plainRaw(v json.RawMessage) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c < ' ' || c >= 0x80 || c == '<' || c == '>' || c == '&':
			return false
		case c == ' ' && !inString:
			return false
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			i++ // the escaped character, a quote perhaps
		}
	}
	return json.Valid(v)
}
