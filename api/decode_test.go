package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type testAttr struct {
	Size int `json:"size"`
}

type testResource struct {
	ID     string              `json:"id"`
	Purged bool                `json:"purged"`
	Attrs  map[string]testAttr `json:"attrs"`
}

type TestEmbedded struct {
	Note string `json:"note"`
}

// checkedID is a field type whose unmarshaler reports a problem itself.
type checkedID string

func (c *checkedID) UnmarshalJSON(b []byte) error {
	if string(b) == `""` {
		return InvalidField("/checked", "must not be empty")
	}
	*c = checkedID(b)
	return nil
}

type testRequest struct {
	TestEmbedded
	Name      string            `json:"name"`
	Count     int8              `json:"count"`
	Ratio     float32           `json:"ratio"`
	Resources []testResource    `json:"resources"`
	Matrix    [][]bool          `json:"matrix"`
	Raw       json.RawMessage   `json:"raw"`
	When      time.Time         `json:"when"`
	Tags      map[string]string `json:"tags"`
	Checked   checkedID         `json:"checked"`
	Ignored   string            `json:"-"`
}

func newJSONRequest(contentType, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/things", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

func TestDecode(t *testing.T) {
	t.Parallel()
	const js = "application/json"
	tests := []struct {
		name        string
		reason      string
		contentType string
		body        string
		maxBytes    int64
		wantStatus  int // 0: success
		wantType    string
		wantDetail  string // exact unless empty
		wantErrors  []FieldError
	}{
		// Success.
		{name: "complete body", reason: "every field kind decodes", contentType: js,
			body: `{"name":"web","count":-3,"ratio":0.5,"resources":[{"id":"a","purged":true,"attrs":{"k":{"size":1}}}],` +
				`"matrix":[[true],[]],"raw":{"anything":[1]},"when":"2026-01-02T03:04:05Z","tags":{"a/b":"c"},"note":"n","NAME":"web"}`},
		{name: "charset", reason: "a UTF-8 charset parameter is allowed", contentType: "application/json; charset=UTF-8", body: `{}`},
		{name: "structured suffix", reason: "application/*+json is JSON", contentType: "application/merge-patch+json", body: `{}`},
		{name: "trailing whitespace", reason: "whitespace after the value is not data", contentType: js, body: "{}\r\n\t "},
		{name: "exactly at limit", reason: "the limit is inclusive", contentType: js, body: `{"name":"abc"}`, maxBytes: 14},

		// 415.
		{name: "text/plain", reason: "only JSON is accepted", contentType: "text/plain", body: `{}`,
			wantStatus: 415, wantType: TypeUnsupportedMediaType, wantDetail: `Content-Type must be application/json, got "text/plain"`},
		{name: "form", reason: "a +json suffix outside application/ is not JSON", contentType: "text/x+json", body: `{}`,
			wantStatus: 415, wantType: TypeUnsupportedMediaType},
		{name: "no content type", reason: "a body without Content-Type is refused", body: `{}`,
			wantStatus: 415, wantType: TypeUnsupportedMediaType},
		{name: "unparseable content type", reason: "a broken header is refused, not guessed at", contentType: "application/json; charset",
			body: `{}`, wantStatus: 415, wantType: TypeUnsupportedMediaType},
		{name: "latin1", reason: "JSON must be UTF-8", contentType: "application/json; charset=iso-8859-1", body: `{}`,
			wantStatus: 415, wantType: TypeUnsupportedMediaType, wantDetail: `charset "iso-8859-1" is not supported; send UTF-8`},

		// 413.
		{name: "too large", reason: "one byte over the limit", contentType: js, body: `{"name":"abcd"}`, maxBytes: 14,
			wantStatus: 413, wantType: TypeBodyTooLarge, wantDetail: "request body exceeds the limit of 14 bytes"},

		// 400.
		{name: "empty", reason: "no body at all", contentType: js, body: "",
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body is empty"},
		{name: "empty without content type", reason: "an empty body needs no Content-Type, so emptiness is the error", body: "",
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body is empty"},
		{name: "only whitespace", reason: "whitespace is not a value", contentType: js, body: " \n ",
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body is empty"},
		{name: "syntax error", reason: "the detail locates the offending byte", contentType: js, body: `{"a" 1}`,
			wantStatus: 400, wantType: TypeMalformedJSON,
			wantDetail: "invalid JSON at line 1, column 6 (byte offset 5): invalid character '1' after object key"},
		{name: "syntax error on line 3", reason: "lines and columns count from 1", contentType: js,
			body:       "{\n  \"name\": \"x\",\n  \"count\": 1 2\n}",
			wantStatus: 400, wantType: TypeMalformedJSON,
			wantDetail: "invalid JSON at line 3, column 14 (byte offset 30): invalid character '2' after object key:value pair"},
		{name: "columns count characters", reason: "multi-byte characters are one column", contentType: js,
			body: `{"name":"é" x}`, wantStatus: 400, wantType: TypeMalformedJSON,
			wantDetail: "invalid JSON at line 1, column 13 (byte offset 13): invalid character 'x' after object key:value pair"},
		{name: "truncated", reason: "a body cut short is not a syntax error at some offset", contentType: js, body: `{"name":"x",`,
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body ends unexpectedly"},
		{name: "two values", reason: "exactly one JSON value is expected", contentType: js, body: `{} {}`,
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body has data after the JSON value"},
		{name: "trailing garbage", reason: "garbage after the value is trailing data too", contentType: js, body: `{}x`,
			wantStatus: 400, wantType: TypeMalformedJSON, wantDetail: "request body has data after the JSON value"},

		// 422 invalid-field.
		{name: "nested array element", reason: "the pointer has the index encoding/json leaves out", contentType: js,
			body:       `{"resources":[{},{},{},{"purged":"yes"}]}`,
			wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/resources/3/purged", Detail: "expected boolean, got string"}}},
		{name: "wrong type with whitespace", reason: "offsets survive formatting", contentType: js,
			body:       "{\n  \"resources\": [\n    {},\n    { \"id\" : 7 }\n  ]\n}",
			wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/resources/1/id", Detail: "expected string, got number"}}},
		{name: "integer out of range", reason: "the range of the Go type is stated in JSON terms", contentType: js,
			body: `{"count":300}`, wantStatus: 422, wantType: TypeInvalidField,
			wantDetail: `field "/count": expected integer between -128 and 127, got 300`,
			wantErrors: []FieldError{{Field: "/count", Detail: "expected integer between -128 and 127, got 300"}}},
		{name: "fraction for integer", reason: "a fraction is not an integer", contentType: js, body: `{"count":1.5}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/count", Detail: "expected integer, got number 1.5"}}},
		{name: "float out of range", reason: "float32 overflows too", contentType: js, body: `{"ratio":1e39}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/ratio", Detail: "expected number, got out-of-range number 1e39"}}},
		{name: "bool for integer", reason: "JSON type names, not Go ones", contentType: js, body: `{"count":true}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/count", Detail: "expected integer, got boolean"}}},
		{name: "nested arrays", reason: "indices at every level", contentType: js, body: `{"matrix":[[true],[false,"x"]]}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/matrix/1/1", Detail: "expected boolean, got string"}}},
		{name: "array for object element", reason: "a mismatched container is located by its start", contentType: js,
			body: `{"resources":[{}, [1]]}`, wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/resources/1", Detail: "expected object, got array"}}},
		{name: "array in array for object", reason: "the outer container is meant, not the first inner one", contentType: js,
			body: `{"resources":[[[]]]}`, wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/resources/0", Detail: "expected object, got array"}}},
		{name: "string for array", reason: "the field itself is wrong", contentType: js, body: `{"resources":"all"}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/resources", Detail: "expected array, got string"}}},
		{name: "map value", reason: "map keys appear in the pointer", contentType: js,
			body: `{"resources":[{"attrs":{"k":{"size":"big"}}}]}`, wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/resources/0/attrs/k/size", Detail: "expected integer, got string"}}},
		{name: "escaped key", reason: "pointer tokens escape / and ~", contentType: js, body: `{"tags":{"a/b~c":1}}`,
			wantStatus: 422, wantType: TypeInvalidField, wantErrors: []FieldError{{Field: "/tags/a~1b~0c", Detail: "expected string, got number"}}},
		{name: "escaped key in body", reason: "member names are unescaped as encoding/json does", contentType: js,
			body: `{"tags":{"x\u002fy":1}}`, wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/tags/x~1y", Detail: "expected string, got number"}}},
		{name: "top-level array", reason: "the whole body has pointer \"\"", contentType: js, body: ` [1]`,
			wantStatus: 422, wantType: TypeInvalidField, wantDetail: "request body: expected object, got array",
			wantErrors: []FieldError{{Field: "", Detail: "expected object, got array"}}},
		{name: "text unmarshaler", reason: "types decoded from text expect a string", contentType: js, body: `{"when":1}`,
			wantStatus: 422},

		// 422 unknown-field.
		{name: "unknown top-level", reason: "a misspelt name", contentType: js, body: `{"nmae":"x"}`,
			wantStatus: 422, wantType: TypeUnknownField, wantDetail: `unknown field "nmae"`,
			wantErrors: []FieldError{{Field: "/nmae", Detail: `unknown field "nmae"`}}},
		{name: "unknown nested", reason: "the pointer reaches into arrays", contentType: js,
			body: `{"resources":[{"id":"a"},{"id":"b","purge":true}]}`, wantStatus: 422, wantType: TypeUnknownField,
			wantErrors: []FieldError{{Field: "/resources/1/purge", Detail: `unknown field "purge"`}}},
		{name: "unknown name known elsewhere", reason: "the type decides which occurrence is unknown", contentType: js,
			body: `{"resources":[{"id":"a"}],"id":"x"}`, wantStatus: 422, wantType: TypeUnknownField,
			wantErrors: []FieldError{{Field: "/id", Detail: `unknown field "id"`}}},
		{name: "unknown in map value", reason: "map values are typed too", contentType: js,
			body: `{"resources":[{"attrs":{"k":{"size":1,"colour":"red"}}}]}`, wantStatus: 422, wantType: TypeUnknownField,
			wantErrors: []FieldError{{Field: "/resources/0/attrs/k/colour", Detail: `unknown field "colour"`}}},
		{name: "unknown beside raw", reason: "members inside a RawMessage are not checked", contentType: js,
			body: `{"raw":{"zz":1},"zz":2}`, wantStatus: 422, wantType: TypeUnknownField,
			wantErrors: []FieldError{{Field: "/zz", Detail: `unknown field "zz"`}}},
		{name: "ignored field", reason: `a json:"-" field cannot be set`, contentType: js, body: `{"Ignored":"x"}`,
			wantStatus: 422, wantType: TypeUnknownField, wantErrors: []FieldError{{Field: "/Ignored", Detail: `unknown field "Ignored"`}}},

		// Other 422.
		{name: "unmarshaler error", reason: "errors of field types are the client's, without a pointer", contentType: js,
			body: `{"when":"yesterday"}`, wantStatus: 422, wantType: TypeValidation},
		{name: "unmarshaler problem", reason: "a problem from an unmarshaler passes through", contentType: js,
			body: `{"checked":""}`, wantStatus: 422, wantType: TypeInvalidField,
			wantErrors: []FieldError{{Field: "/checked", Detail: "must not be empty"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var dst testRequest
			err := Decode(newJSONRequest(tt.contentType, tt.body), &dst, tt.maxBytes)
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("%s: Decode() = %v, want success", tt.reason, err)
				}
				return
			}
			p, ok := err.(*Problem)
			if !ok {
				t.Fatalf("%s: Decode() = %T %v, want a *Problem", tt.reason, err, err)
			}
			if p.Status != tt.wantStatus || (tt.wantType != "" && p.Type != tt.wantType) {
				t.Fatalf("%s: got %d %s (%v), want %d %s", tt.reason, p.Status, p.Type, p, tt.wantStatus, tt.wantType)
			}
			if tt.wantDetail != "" && p.Detail != tt.wantDetail {
				t.Errorf("%s: detail = %q, want %q", tt.reason, p.Detail, tt.wantDetail)
			}
			if tt.wantErrors != nil && !slices.Equal(p.Errors, tt.wantErrors) {
				t.Errorf("%s: errors = %v, want %v", tt.reason, p.Errors, tt.wantErrors)
			}
		})
	}
}

func TestDecodeValues(t *testing.T) {
	t.Parallel()
	var got testRequest
	body := `{"name":"web","count":-3,"resources":[{"id":"a","purged":true,"attrs":{"k":{"size":1}}}],"note":"n"}`
	if err := Decode(newJSONRequest("application/json", body), &got, 0); err != nil {
		t.Fatalf("Decode() = %v", err)
	}
	if got.Name != "web" || got.Count != -3 || got.Note != "n" ||
		len(got.Resources) != 1 || !got.Resources[0].Purged || got.Resources[0].Attrs["k"].Size != 1 {
		t.Errorf("decoded %+v", got)
	}
}

func TestDecodeNonPointer(t *testing.T) {
	t.Parallel()
	// A non-pointer destination is the handler's bug: WriteError must log
	// it, so it must not look like the client's fault.
	err := Decode(newJSONRequest("application/json", `{}`), testRequest{}, 0)
	if err == nil {
		t.Fatal("Decode() into a non-pointer succeeded")
	}
	if _, ok := errors.AsType[*Problem](err); ok {
		t.Errorf("Decode() into a non-pointer = problem %v, want a plain error", err)
	}
}

// TestUnmarshalTypeErrorField records what encoding/json puts in
// UnmarshalTypeError.Field for an element of a nested array, which is why
// Decode locates such errors by offset instead: the default implementation
// leaves the index out, the GOEXPERIMENT=jsonv2 one keeps it.
func TestUnmarshalTypeErrorField(t *testing.T) {
	t.Parallel()
	var dst testRequest
	err := json.Unmarshal([]byte(`{"resources":[{},{},{},{"purged":"x"}]}`), &dst)
	ute, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		t.Fatalf("Unmarshal() = %v, want an UnmarshalTypeError", err)
	}
	switch ute.Field {
	case "resources.purged":
		if typeErrorsHaveStartOffsets() {
			t.Errorf("the probe expects indices in Field, but Field is %q", ute.Field)
		}
	case "resources.3.purged":
		if !typeErrorsHaveStartOffsets() {
			t.Errorf("the probe expects no indices in Field, but Field is %q", ute.Field)
		}
	default:
		t.Errorf("UnmarshalTypeError.Field = %q: encoding/json changed, check typeErrorPointer", ute.Field)
	}
	t.Logf("UnmarshalTypeError.Field = %q, Offset = %d", ute.Field, ute.Offset)
}

// TestUnknownFieldErrorText pins the text unknownFieldName depends on.
func TestUnknownFieldErrorText(t *testing.T) {
	t.Parallel()
	dec := json.NewDecoder(strings.NewReader(`{"we\"ird":1}`))
	dec.DisallowUnknownFields()
	var dst struct{}
	err := dec.Decode(&dst)
	if name, ok := unknownFieldName(err); !ok || name != `we"ird` {
		t.Errorf("unknownFieldName(%q) = %q, %v; want the member name", err, name, ok)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestReadBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reason     string
		request    func() *http.Request
		maxBytes   int64
		wantBody   string
		wantStatus int
		wantDetail string
	}{
		{name: "raw bytes", reason: "the body comes back untouched, even if it is not valid JSON",
			request:  func() *http.Request { return newJSONRequest("application/json", "{not json") },
			wantBody: "{not json"},
		{name: "empty", reason: "emptiness is for the caller's decoder to judge",
			request:  func() *http.Request { return newJSONRequest("", "") },
			wantBody: ""},
		{name: "nil body", reason: "server requests always have a body, hand-made ones may not",
			request: func() *http.Request {
				r := newJSONRequest("application/json", "")
				r.Body = nil
				return r
			},
			wantBody: ""},
		{name: "declared too large", reason: "a Content-Length over the limit is refused before reading",
			request: func() *http.Request {
				r := newJSONRequest("application/json", "{}")
				r.Body = io.NopCloser(failingReader{})
				r.ContentLength = 11
				return r
			},
			maxBytes: 10, wantStatus: 413, wantDetail: "request body exceeds the limit of 10 bytes"},
		{name: "default limit", reason: "a limit <= 0 means DefaultMaxBodyBytes",
			request: func() *http.Request {
				return newJSONRequest("application/json", strings.Repeat(" ", int(DefaultMaxBodyBytes)+1))
			},
			wantStatus: 413, wantDetail: "request body exceeds the limit of " + strconv.FormatInt(DefaultMaxBodyBytes, 10) + " bytes"},
		{name: "upstream limit", reason: "a smaller http.MaxBytesReader limit is reported as such",
			request: func() *http.Request {
				r := newJSONRequest("application/json", strings.Repeat(" ", 100))
				r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 5)
				r.ContentLength = -1 // as if chunked, so the body must be read
				return r
			},
			maxBytes: 50, wantStatus: 413, wantDetail: "request body exceeds the limit of 5 bytes"},
		{name: "read error", reason: "a broken connection is a 400 without the error's text",
			request: func() *http.Request {
				r := newJSONRequest("application/json", "")
				r.Body = io.NopCloser(failingReader{})
				return r
			},
			wantStatus: 400, wantDetail: "request body could not be read"},
		{name: "media type first", reason: "a non-JSON body is refused before it is read",
			request: func() *http.Request {
				r := newJSONRequest("text/csv", "")
				r.Body = io.NopCloser(failingReader{})
				return r
			},
			wantStatus: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := ReadBody(tt.request(), tt.maxBytes)
			if tt.wantStatus == 0 {
				if err != nil || string(body) != tt.wantBody {
					t.Fatalf("%s: ReadBody() = %q, %v; want %q", tt.reason, body, err, tt.wantBody)
				}
				return
			}
			p, ok := err.(*Problem)
			if !ok || p.Status != tt.wantStatus || (tt.wantDetail != "" && p.Detail != tt.wantDetail) {
				t.Fatalf("%s: ReadBody() error = %v, want status %d %q", tt.reason, err, tt.wantStatus, tt.wantDetail)
			}
		})
	}
}

// firstReadReader records the buffer the first Read is offered: what the
// server holds for a body before any byte of it has arrived.
type firstReadReader struct {
	r     io.Reader
	first int // len of the first Read's buffer; 0: not read yet
}

func (f *firstReadReader) Read(p []byte) (int, error) {
	if f.first == 0 {
		f.first = len(p)
	}
	return f.r.Read(p)
}

// TestReadBodyAnnouncedIsNotHeld: a client that announces a large body
// and sends a little of it (slowly) must not make the server hold what it
// announced: at most 64 KiB before the bytes arrive, more only as they
// do. Before, a 1 MiB announcement held 1 MiB per connection at once.
func TestReadBodyAnnouncedIsNotHeld(t *testing.T) {
	t.Parallel()
	for _, announced := range []int64{1 << 20, 32 << 20} {
		probe := &firstReadReader{r: strings.NewReader("{}")}
		r := newJSONRequest("application/json", "")
		r.Body, r.ContentLength = io.NopCloser(probe), announced
		body, err := ReadBody(r, 32<<20)
		if err != nil || string(body) != "{}" {
			t.Fatalf("announced %d: ReadBody() = %q, %v; want {}", announced, body, err)
		}
		if probe.first > 64<<10+1 {
			t.Errorf("announced %d, sent 2 bytes: %d bytes held before the first byte arrived, want at most 64 KiB", announced, probe.first)
		}
		if cap(body) > 64<<10+1 {
			t.Errorf("announced %d, sent 2 bytes: a buffer of %d bytes, want at most 64 KiB", announced, cap(body))
		}
	}
	// A body as large as announced still arrives whole, in a buffer that
	// grew with it to what was announced (and the byte that sees the end),
	// not beyond.
	big := bytes.Repeat([]byte(" "), 3<<20+5)
	big[0], big[len(big)-1] = '[', ']'
	r := newJSONRequest("application/json", "")
	r.Body, r.ContentLength = io.NopCloser(iotest.HalfReader(bytes.NewReader(big))), int64(len(big))
	body, err := ReadBody(r, 32<<20)
	if err != nil || !bytes.Equal(body, big) {
		t.Fatalf("announced and sent %d bytes: got %d, %v", len(big), len(body), err)
	}
	if cap(body) != len(big)+1 {
		t.Errorf("announced and sent %d bytes: a buffer of %d, want %d", len(big), cap(body), len(big)+1)
	}
}

// TestDecodeThroughWriteError checks the path a handler takes: Decode's
// problem rendered by WriteError.
func TestDecodeThroughWriteError(t *testing.T) {
	t.Parallel()
	r := newJSONRequest("application/json", `{"resources":[{},{"purged":1}]}`)
	rec := httptest.NewRecorder()
	var dst testRequest
	WriteError(rec, r, nil, Decode(r, &dst, 0))
	got := decodeProblem(t, rec)
	want := Problem{
		Type: TypeInvalidField, Title: "Invalid field", Status: 422,
		Detail:   `field "/resources/1/purged": expected boolean, got number`,
		Instance: "/v1/things",
		Errors:   []FieldError{{Field: "/resources/1/purged", Detail: "expected boolean, got number"}},
	}
	if got.Type != want.Type || got.Title != want.Title || got.Status != want.Status ||
		got.Detail != want.Detail || got.Instance != want.Instance || !slices.Equal(got.Errors, want.Errors) {
		t.Errorf("rendered %+v, want %+v", got, want)
	}
}

// fuzzTarget is the request shape FuzzDecode decodes into.
type fuzzTarget struct {
	Name   string
	Count  int
	Flags  []bool
	Nested struct{ A bool }
}

// allPointers returns the JSON pointer of every value in the JSON text
// body, duplicate member names included. It is written independently of
// walkJSON, by recursion, so that the two check each other.
func allPointers(body []byte) (map[string]bool, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	out := map[string]bool{}
	var value func(ptr string) error
	value = func(ptr string) error {
		out[ptr] = true
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				esc := strings.NewReplacer("~", "~0", "/", "~1").Replace(key.(string))
				if err := value(ptr + "/" + esc); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				if err := value(ptr + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	return out, value("")
}

func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		``, ` `, `{}`, `null`, `[]`, `"x"`, `{"Name":"a","Count":1,"Flags":[true,false],"Nested":{"A":true}}`,
		`{"Flags":[true,1]}`, `{"Nested":{"A":true,"B":1}}`, `{"Count":1e400}`, `{"Count":"1"}`, `{"name":1}`,
		`{"a" 1}`, `{"Name":"x",`, `{} {}`, `{}x`, `[[[]]]`, `{"Flags":[[1]]}`, `{"Flags":{"a":1}}`,
		"\xef\xbb\xbf{}", `{"Nested":{"A":true},"Nested":{"x":1}}`, `{"x":{"y":[{"z":1}]}}`,
		strings.Repeat("[", 20000), `{"Name":"` + strings.Repeat("a", 5000) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var dst fuzzTarget
		err := Decode(r, &dst, 4096)
		if err == nil {
			if !json.Valid(body) {
				t.Fatalf("Decode accepted invalid JSON %q", body)
			}
			return
		}
		p, ok := err.(*Problem)
		if !ok {
			t.Fatalf("Decode(%q) = %T %v, want a *Problem", body, err, err)
		}
		switch p.Status {
		case 400, 413, 415, 422:
		default:
			t.Fatalf("Decode(%q) = status %d (%v)", body, p.Status, p)
		}
		if _, ok := problemTypes[p.Type]; !ok || p.Title == "" || p.Detail == "" {
			t.Fatalf("Decode(%q) = incomplete problem %+v", body, p)
		}
		if p.Type != TypeInvalidField && p.Type != TypeUnknownField {
			return
		}
		// A field problem must point at something that is in the body.
		if len(p.Errors) != 1 {
			t.Fatalf("Decode(%q) = %v, want one field entry", body, p)
		}
		pointers, err := allPointers(body)
		if err != nil {
			t.Fatalf("Decode(%q) = %v for a body that is not valid JSON: %v", body, p, err)
		}
		if !pointers[p.Errors[0].Field] {
			t.Fatalf("Decode(%q): pointer %q is not in the body", body, p.Errors[0].Field)
		}
	})
}

// TestDecodeHostileBodies decodes bodies built to make locating an error
// expensive: deep nesting inside a field that takes any JSON, and many
// members with the unknown name, up to the full default limit.
func TestDecodeHostileBodies(t *testing.T) {
	t.Parallel()
	const depth = 9000 // encoding/json refuses more than 10000
	deep := strings.Repeat("[", depth) + strings.Repeat("1,", 400_000) + "1" + strings.Repeat("]", depth)
	tests := []struct {
		name       string
		reason     string
		body       string
		wantErrors []FieldError
	}{
		{"unknown after deep raw", "the walk past the raw value must stay linear",
			`{"raw":` + deep + `,"zz":1}`, []FieldError{{Field: "/zz", Detail: `unknown field "zz"`}}},
		{"type error after deep raw", "the walk to the offset must stay linear",
			`{"raw":` + deep + `,"count":"x"}`, []FieldError{{Field: "/count", Detail: "expected integer, got string"}}},
		{"many unknown names", "only the first occurrence's pointer is built",
			`{"raw":` + strings.Repeat("[", depth) + strings.Repeat(`{"zz":1},`, 100_000) + "1" + strings.Repeat("]", depth) + `,"zz":1}`,
			[]FieldError{{Field: "/zz", Detail: `unknown field "zz"`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if int64(len(tt.body)) > DefaultMaxBodyBytes {
				t.Fatalf("body of %d bytes is over the default limit", len(tt.body))
			}
			var dst testRequest
			err := Decode(newJSONRequest("application/json", tt.body), &dst, 0)
			p, ok := err.(*Problem)
			if !ok || !slices.Equal(p.Errors, tt.wantErrors) {
				t.Errorf("%s: Decode() = %v, want errors %v", tt.reason, err, tt.wantErrors)
			}
		})
	}
}

// FuzzWalkJSON checks the walker that locates errors against an
// independent parser: on valid JSON both must see the same values, and on
// anything else the walker must stop without panicking.
func FuzzWalkJSON(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `1`, `"s"`, ` {"a":[1,{"b":null}],"c\u002f~":"x"} `, `{"a":`, `[1,,2]`, `}`, `{"a" 1}`,
		`{"\"":true,"":false}`, `[-1.5e+3, "\\\\", "]"]`, "[\"\xff\"]", `{"a":{"b":{"c":[[[]]]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := map[string]bool{}
		walkJSON(body, func(ev jsonEvent) bool {
			if !ev.isKey {
				got[ev.pointer()] = true
			}
			return true
		})
		if !json.Valid(body) {
			return
		}
		want, err := allPointers(body)
		if err != nil {
			t.Fatalf("allPointers(%q): %v", body, err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("walkJSON(%q) saw %v, want %v", body, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	})
}
