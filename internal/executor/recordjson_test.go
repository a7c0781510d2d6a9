package executor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// sampleRecord is an attempt as the executor records it: an unchanged
// file with its facts.
func sampleRecord(i int) ledger.ActionRecord {
	at := time.Date(2026, 11, 27, 11, 43, 41, 386123456, time.UTC)
	return ledger.ActionRecord{ResourceID: fmt.Sprintf("fs::File[bench,path=/dev/shm/intend-bench/f%05d]", i),
		Version: 3, Action: ledger.ActionDeploy, Reason: "deploy requested", StartedAt: at, FinishedAt: at.Add(time.Millisecond),
		Result: ledger.ResultDeployed, Operation: "none", WorkflowID: "env/bench/deploy/1", RunID: "0b7c1f0e-7f5e-4e43-9a59-1f4c1f7b2e61",
		Attempt: 1, Executor: "bench-bench-0",
		Facts: map[string]json.RawMessage{"size": json.RawMessage(`1024`), "mtime": json.RawMessage(`"2026-11-27T11:43:41.386123456Z"`)}}
}

func checkAppendRecord(t *testing.T, rec ledger.ActionRecord) {
	t.Helper()
	want, wantErr := json.Marshal(rec)
	got, err := appendRecord([]byte("prefix"), &rec)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%+v: error %v, json.Marshal's %v", rec, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("appendRecord wrote\n%s\njson.Marshal\n%s", got, want)
	}
}

// TestAppendRecordAsMarshal: appendRecord writes json.Marshal's bytes,
// for records it writes itself and those it leaves to json.Marshal.
func TestAppendRecordAsMarshal(t *testing.T) {
	t.Parallel()
	full := sampleRecord(1)
	full.Hash, full.Changed, full.Error, full.ErrorClass = []byte{1, 2, 250}, true, "no", "transient"
	full.Changes = json.RawMessage(`{"content":{"from":null,"to":"x"}}`)
	full.Logs = json.RawMessage(`[{"level":"info","msg":"created"}]`)
	cases := []func(r *ledger.ActionRecord){
		func(r *ledger.ActionRecord) {},
		func(r *ledger.ActionRecord) { *r = full },
		func(r *ledger.ActionRecord) { *r = ledger.ActionRecord{} },
		func(r *ledger.ActionRecord) { r.Hash = []byte{} },
		func(r *ledger.ActionRecord) { r.Error = "a \"quoted\" <tag> & \n line, é, \u2028, \xff" },
		func(r *ledger.ActionRecord) { r.Changes = json.RawMessage(`{"a": "b"}`) },
		func(r *ledger.ActionRecord) { r.Logs = json.RawMessage(`["<b>"]`) },
		func(r *ledger.ActionRecord) {
			r.Logs = json.RawMessage(`[{"msg":"created the file \"a b\" ","x":" "}]`)
		},
		func(r *ledger.ActionRecord) { r.Logs = json.RawMessage(`[{"msg":"a\\"} ,1]`) },
		func(r *ledger.ActionRecord) { r.Logs = json.RawMessage(`["a\"", 1]`) }, // an escaped quote ends no string
		func(r *ledger.ActionRecord) {
			r.Facts = map[string]json.RawMessage{"z": json.RawMessage(`1`), "<a>": json.RawMessage(`2`)}
		},
		func(r *ledger.ActionRecord) { r.Facts = map[string]json.RawMessage{"bad": json.RawMessage(`{`)} },
		func(r *ledger.ActionRecord) { r.Changes = json.RawMessage(`nul`) },
		func(r *ledger.ActionRecord) { r.StartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(r *ledger.ActionRecord) { r.FinishedAt = r.FinishedAt.In(time.FixedZone("x", 3600+1800)) },
		func(r *ledger.ActionRecord) { r.Version, r.Attempt = -5, 1<<40 },
	}
	for _, f := range cases {
		rec := sampleRecord(0)
		f(&rec)
		checkAppendRecord(t, rec)
	}
}

func FuzzAppendRecord(f *testing.F) {
	f.Add("fs::File[a,path=/x]", "deploy", "none", "", []byte{1}, []byte(`{"a":1}`), "size", []byte(`1`), int64(3))
	f.Add("<&>", "dryrun", "update", "x\ny", []byte(nil), []byte(`[ 1 ]`), "é", []byte(`"\u2028"`), int64(-1))
	f.Fuzz(func(t *testing.T, id, action, op, errText string, hash, changes []byte, fact string, value []byte, n int64) {
		rec := sampleRecord(0)
		rec.ResourceID, rec.Action, rec.Operation, rec.Error, rec.Hash, rec.Version = id, ledger.Action(action), op, errText, hash, n
		rec.Changes, rec.Logs = changes, value
		rec.Facts = map[string]json.RawMessage{fact: value, "size": changes}
		rec.StartedAt = time.Unix(n, n).UTC()
		checkAppendRecord(t, rec)
	})
}

// BenchmarkEncodeRecord: one attempt as the executor encoded it before
// (json.Marshal) and now (appendRecord).
func BenchmarkEncodeRecord(b *testing.B) {
	rec := sampleRecord(7)
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendRecord(make([]byte, 0, 512), &rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
