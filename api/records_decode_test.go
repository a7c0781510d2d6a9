package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// sampleRecords is a chunk of n records as an executor sends them: one
// created file with its facts and a diff, the others unchanged.
func sampleRecords(n int) []byte {
	at := time.Date(2026, 11, 27, 11, 43, 41, 386123456, time.UTC)
	req := RecordRequest{}
	for i := range n {
		rec := ledger.ActionRecord{ResourceID: fmt.Sprintf("fs::File[bench,path=/dev/shm/intend-bench/f%05d]", i),
			Version: 3, Action: ledger.ActionDeploy, Reason: "deploy requested", StartedAt: at, FinishedAt: at.Add(time.Millisecond),
			Result: ledger.ResultDeployed, Operation: "none", WorkflowID: "env/bench/deploy/1", RunID: "0b7c1f0e-7f5e-4e43-9a59-1f4c1f7b2e61",
			Attempt: 1, Executor: "bench-bench-0",
			Facts: map[string]json.RawMessage{"size": json.RawMessage(`1024`), "mtime": json.RawMessage(`"2026-11-27T11:43:41.386123456Z"`)}}
		if i == 0 {
			rec.Operation, rec.Changed = "create", true
			rec.Changes = json.RawMessage(`{"content":{"from":null,"to":"hello \"world\"\n"}}`)
			rec.Logs = json.RawMessage(`[{"level":"info","msg":"created","at":"2026-11-27T11:43:41Z"}]`)
		}
		req.Records = append(req.Records, rec)
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

// recordBodies are bodies the fast reader takes and bodies it must leave
// to the strict decoder, each for a reason.
var recordBodies = []string{
	string(sampleRecords(3)),
	`{"records":[],"again":true}`,
	`{"again":false}`,
	`{}`,
	` { "records" : [ { "resource_id" : "a" , "hash" : "AAEC" , "version" : 7 , "attempt" : -2 } ] } `,
	`{"records":[{"hash":null,"changes":null,"logs":5,"facts":{"a":true,"a":[1,{"b":"]"}],"\u00e9":null}}]}`,
	`{"records":[{"facts":null,"error":"é \u2028 \ud800 x\"y"}]}`,
	`{"records":[{"facts":{}, "changes":{"x":[]}, "logs":[]}]}`,
	// What encoding/json alone answers: unknown, other-case or twice-given
	// keys, nulls, numbers of another shape, wrong types, bad base64.
	`{"records":[{"resource_ID":"a"}]}`,
	`{"records":[{"nope":1}]}`,
	`{"records":[{"resource_id":"a","resource_id":"b"}]}`,
	`{"records":[{"version":1}],"records":[{"attempt":2}]}`,
	`{"records":null}`,
	`{"records":[null]}`,
	`{"records":[{"resource_id":null}]}`,
	`{"records":[{"version":1.0}]}`,
	`{"records":[{"version":1e2}]}`,
	`{"records":[{"version":99999999999999999999}]}`,
	`{"records":[{"version":"1"}]}`,
	`{"records":[{"hash":"!!"}]}`,
	`{"records":[{"hash":"A\u0041=="}]}`,
	`{"records":[{"started_at":"yesterday"}]}`,
	`{"records":[{"started_at":5}]}`,
	`{"records":[{"changed":"true"}]}`,
	`{"records":{}}`,
	`{"again":null}`,
	`{"records":[{"resource_id":"\u0000"}]}`,
	`{"records":[{"facts":{"n":1e400}}]}`,
	"{\"records\":[{\"resource_id\":\"\xff\"}]}",
	// Not JSON, inside values the fast reader keeps raw.
	`{"records":[{"changes":01}]}`,
	`{"records":[{"changes":"\x"}]}`,
	`{"records":[{"changes":"\u12G4"}]}`,
	`{"records":[{"changes":[1,]}]}`,
	`{"records":[{"changes":{"a":1,}}]}`,
	`{"records":[{"logs":tru}]}`,
	"{\"records\":[{\"changes\":\"a\tb\"}]}",
	`{"records":[{"version":-0,"attempt":007}]}`,
	`{"records":[{"changes":-}]}`,
	`{"records":[{"changes":1.}]}`,
	`{"records":[{"changes":1e}]}`,
	`{"records":[{"changes":-1.5e+3}]}`,
	`{"records":[{"changes":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}]}`,
	`{"records":[]} {}`,
	`[]`,
	``,
	`   `,
	`{"records":[`,
}

// checkDecodeRecords: decodeRecords answers as decodeJSON does, the
// value and the problem.
func checkDecodeRecords(t *testing.T, body []byte) {
	var fast, strict RecordRequest
	errFast, errStrict := decodeRecords(body, &fast), decodeJSON(body, &strict)
	if !reflect.DeepEqual(errFast, errStrict) {
		t.Fatalf("%q: error %v, strict %v", body, errFast, errStrict)
	}
	if !reflect.DeepEqual(fast, strict) {
		t.Fatalf("%q: decoded\n%+v\nstrict\n%+v", body, fast, strict)
	}
	var fastIn, strictIn IntentsRequest
	errFast, errStrict = decodeIntents(body, &fastIn), decodeJSON(body, &strictIn)
	if !reflect.DeepEqual(errFast, errStrict) {
		t.Fatalf("%q: intents error %v, strict %v", body, errFast, errStrict)
	}
	if !reflect.DeepEqual(fastIn, strictIn) {
		t.Fatalf("%q: intents decoded\n%+v\nstrict\n%+v", body, fastIn, strictIn)
	}
}

func TestDecodeRecordsAsStrict(t *testing.T) {
	t.Parallel()
	bodies := append([]string{}, recordBodies...)
	for _, b := range recordBodies {
		// The same with "records" read as "intents".
		bodies = append(bodies, strings.ReplaceAll(b, `"records"`, `"intents"`))
	}
	bodies = append(bodies, `{"intents":[{"resource_id":"a","operation":"create","workflow_id":"w","attempt":3}]}`,
		`{"intents":[{"attempt":3,"attempt":4}]}`, `{"intents":[{"attempt":"3"}]}`)
	for _, b := range bodies {
		checkDecodeRecords(t, []byte(b))
	}
	// The fast reader does read what executors send.
	var req RecordRequest
	c := jsonCursor{b: sampleRecords(3)}
	if !c.recordRequest(&req) || !c.end() || len(req.Records) != 3 {
		t.Fatalf("the fast reader refused a chunk as executors send it: %+v", req)
	}
}

func FuzzDecodeRecords(f *testing.F) {
	for _, b := range recordBodies {
		f.Add([]byte(b))
		f.Add([]byte(strings.ReplaceAll(b, `"records"`, `"intents"`)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeRecords(t, body)
	})
}

// BenchmarkDecodeRecords100: a chunk of 100 records as the server read
// it before (strict) and now (fast).
func BenchmarkDecodeRecords100(b *testing.B) {
	body := sampleRecords(100)
	b.Run("strict", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req RecordRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req RecordRequest
			if err := decodeRecords(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestReadAllAsReadAll: readAll reads what io.ReadAll reads, whatever the
// announced length says.
func TestReadAllAsReadAll(t *testing.T) {
	t.Parallel()
	body := sampleRecords(40)
	for _, announced := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 10 << 20} {
		got, err := readAll(iotest.HalfReader(bytes.NewReader(body)), announced)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("announced %d: %d bytes, %v; want %d", announced, len(got), err, len(body))
		}
		if cap(got) > maxPresize+1 {
			t.Fatalf("announced %d: a buffer of %d bytes for %d, beyond maxPresize", announced, cap(got), len(body))
		}
	}
	if _, err := readAll(iotest.ErrReader(errors.New("cut")), 10); err == nil {
		t.Fatal("a read error was lost")
	}
}

// BenchmarkReadBody: a chunk of 100 records read as before (io.ReadAll)
// and now (readAll with its Content-Length).
func BenchmarkReadBody(b *testing.B) {
	body := sampleRecords(100)
	b.Run("io.ReadAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := io.ReadAll(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("readAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readAll(bytes.NewReader(body), int64(len(body))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
