package ledger

import (
	"bytes"
	"encoding/json"
)

// Sensitive outputs are what an adapter read on its target that may hold
// a secret: a command's stdout and stderr, a file's content. The adapter
// declares them (adapters.SensitiveOutput for a log attribute,
// adapters.SensitiveDiffs for the change of an attribute); the executor
// records them as they are, marked; and whoever reads an action record
// (the action log, a resource's history, a dry-run report) sees them
// only with a role that could have put the resource into a version:
// author or admin of its environment. Everyone else reads the record
// through RedactLogs and RedactChanges.
//
// In a record:
//
//	logs:    [{"msg", "attrs": {"stdout": "…"}, "sensitive_outputs": ["stdout"]}]
//	changes: {"content": {"from", "to", "diff", …, "sensitive_output": true}}

// RedactedOutput stands for a sensitive output in what a reader below
// author reads.
const RedactedOutput = "[redacted: sensitive output, visible to authors]"

// RedactLogs returns the log lines of an action record (an array of
// adapters.LogLine) with the value of every attribute a line names in
// sensitive_outputs replaced by RedactedOutput, and "redacted": true on
// that line. Lines without sensitive outputs are kept as they are. It
// fails closed: what does not read as log lines is dropped (nil).
func RedactLogs(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return raw
	}
	var lines []map[string]json.RawMessage
	if json.Unmarshal(raw, &lines) != nil {
		return nil
	}
	marker, _ := json.Marshal(RedactedOutput)
	changed := false
	for i, l := range lines {
		if l == nil {
			continue
		}
		keys, ok := l["sensitive_outputs"]
		if !ok || isNull(keys) {
			continue
		}
		var names []string
		var attrs map[string]json.RawMessage
		if json.Unmarshal(keys, &names) != nil || (!isNull(l["attrs"]) && json.Unmarshal(l["attrs"], &attrs) != nil) {
			// Not what an executor writes: the line goes whole.
			lines[i] = map[string]json.RawMessage{"msg": marker, "redacted": json.RawMessage("true")}
			changed = true
			continue
		}
		for _, k := range names {
			if _, ok := attrs[k]; ok {
				attrs[k] = marker
			}
		}
		if attrs != nil {
			l["attrs"], _ = json.Marshal(attrs)
		}
		l["redacted"] = json.RawMessage("true")
		changed = true
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(lines)
	if err != nil {
		return nil
	}
	return out
}

// RedactChanges returns the changes of an action record ({"attr":
// change}) with every change marked "sensitive_output" reduced to
// {"from", "to", "sensitive_output": true, "redacted": true}, from and to
// being RedactedOutput (null for an absent side): no value, diff, size or
// hash. Other changes are kept as they are. It fails closed: what does
// not read as changes is dropped (nil).
func RedactChanges(raw json.RawMessage) json.RawMessage {
	if isNull(raw) {
		return raw
	}
	var changes map[string]json.RawMessage
	if json.Unmarshal(raw, &changes) != nil {
		return nil
	}
	changed := false
	for name, c := range changes {
		var fields map[string]json.RawMessage
		if json.Unmarshal(c, &fields) != nil {
			continue // a change is an object; anything else marks nothing
		}
		var mark bool
		if json.Unmarshal(fields["sensitive_output"], &mark) != nil || !mark {
			continue
		}
		side := func(v json.RawMessage) any {
			if isNull(v) {
				return nil
			}
			return RedactedOutput
		}
		changes[name], _ = json.Marshal(map[string]any{"from": side(fields["from"]), "to": side(fields["to"]),
			"sensitive_output": true, "redacted": true})
		changed = true
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(changes)
	if err != nil {
		return nil
	}
	return out
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}
