package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// referenceAttributes is how the executor decoded attributes before
// decodeAttributes: encoding/json, numbers as json.Number.
func referenceAttributes(raw []byte) (map[string]any, error) {
	attrs := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	err := dec.Decode(&attrs)
	return attrs, err
}

var attributeSeeds = []string{
	`{"path":"/etc/motd","content":"file 1\n","mode":"0644"}`,
	`{"path":"/etc/motd","content":"plain","mode":"0644"}`,
	` { "a" : "b" , "c":"d" } `,
	`{}`, ` {} `, `{"a":"b",}`, `{"a":"b"} x`, `{"a":"b"}{"c":"d"}`, `{"a":"b"`, `{"a" "b"}`,
	`{"a":"b","a":"c"}`, `{"a":1}`, `{"a":"é"}`, `{"a":"\u00e9"}`, `{"a":"tab	in"}`, `{"a":"\xff"}`,
	`{"a":["b"]}`, `{"a":{"b":"c"}}`, `{"a":null}`, `{"a":true}`, `null`, ``, `[]`, `"s"`, `{"a":"b"]`,
	`{"a":"<&>"}`, `{"":""}`, `{"a":"\"\\\/\b\f\n\r\t"}`, `{"a":"\x"}`, `{"a":"\`, `{"\n":"\n\n"}`, "{\"a\":\"\x7f\"}", "{\"a\":\"\xff\"}",
}

// TestDecodeAttributes checks that attributes decode as encoding/json
// decodes them, the plain strings' short way included.
func TestDecodeAttributes(t *testing.T) {
	t.Parallel()
	for _, s := range attributeSeeds {
		checkAttributes(t, []byte(s))
	}
	for _, s := range attributeSeeds[:3] {
		if _, ok := plainStrings([]byte(s)); !ok {
			t.Errorf("%s did not take the plain way", s)
		}
	}
	if _, ok := plainStrings([]byte(`{"a":"\u00e9"}`)); ok {
		t.Errorf("a \\u escape took the plain way")
	}
}

func FuzzDecodeAttributes(f *testing.F) {
	for _, s := range attributeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkAttributes)
}

func checkAttributes(t *testing.T, raw []byte) {
	got, err := decodeAttributes(raw)
	want, wantErr := referenceAttributes(raw)
	if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("%q: error %v, encoding/json's %v", raw, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: %#v, encoding/json's %#v", raw, got, want)
	}
}
