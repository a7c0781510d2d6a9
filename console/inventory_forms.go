package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/intendhq/intend/client"
)

// The create and update forms of a service instance, generated from its
// entity's attributes: each attribute's JSON Schema (the catalog's) says
// which input it gets. The schema is never stricter than the model (the
// model validates the instance), so what the form refuses the model would
// refuse too; what it lets through the API and the model still check.

// field is one input of a form.
type field struct {
	Name        string
	ID          string // the input's id: "attr-" + Name
	Description string
	Modifier    string
	References  string
	// Kind is the input: text, number, checkbox, select or json (a
	// textarea holding a JSON value, for lists, objects and mixed types).
	Kind string
	// Type is the schema's type for text and number: string, integer or
	// number.
	Type     string
	Required bool
	// Min and Max are the number's bounds, Step its step ("1" or "any");
	// Pattern and MinLength, MaxLength the string's.
	Min, Max, Step       string
	Pattern              string
	MinLength, MaxLength int
	// Options are a select's choices: Value is the JSON of the choice.
	Options []option
	// Default is the JSON of the attribute's default ("" for none).
	Default string
	// Value is what the input shows (typed, or the current value);
	// Checked a checkbox's.
	Value   string
	Checked bool
	// Error is what is wrong with the value typed (the console's check or
	// the API's 422).
	Error string
	// Embedded describes the embedded entity the attribute holds (its
	// attributes and their modifiers), edited as JSON; "" for none.
	Embedded string

	schema schema
}

// option is one choice of a select.
type option struct {
	Value, Label string
	Selected     bool
}

// schema is the part of a JSON Schema the forms read.
type schema struct {
	Type             any               `json:"type"`
	Enum             []json.RawMessage `json:"enum"`
	Const            json.RawMessage   `json:"const"`
	Minimum          *float64          `json:"minimum"`
	Maximum          *float64          `json:"maximum"`
	ExclusiveMinimum *float64          `json:"exclusiveMinimum"`
	ExclusiveMaximum *float64          `json:"exclusiveMaximum"`
	Pattern          string            `json:"pattern"`
	MinLength        *int              `json:"minLength"`
	MaxLength        *int              `json:"maxLength"`
	AllOf            []schema          `json:"allOf"`
}

// typeName is the schema's one type, null aside ("" when it has none or
// several).
func (s schema) typeName() string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		var one string
		for _, x := range t {
			if n, _ := x.(string); n != "null" {
				if one != "" {
					return ""
				}
				one = n
			}
		}
		return one
	}
	return ""
}

// patterns are the regular expressions a string must match.
func (s schema) patterns() []string {
	var p []string
	if s.Pattern != "" {
		p = append(p, s.Pattern)
	}
	for _, a := range s.AllOf {
		if a.Pattern != "" {
			p = append(p, a.Pattern)
		}
	}
	return p
}

// form is a create or update form: its fields in the entity's order, and
// the errors that name no field.
type form struct {
	Fields []*field
	Errors []string
	// CurrentVersion is the version an update is made against.
	CurrentVersion int64
}

// hasFieldErrors says whether a field has an error.
func (f *form) hasFieldErrors() bool {
	for _, fl := range f.Fields {
		if fl.Error != "" {
			return true
		}
	}
	return false
}

// newForm is the form of entity's attributes: on create every attribute
// but the r ones, on update only the rw+ ones (and an rw embedded entity
// with rw+ attributes inside), filled with values (the instance's current
// attributes; nil for a create).
func newForm(entity client.EntityDefinition, update bool, values map[string]any) *form {
	f := &form{}
	for _, a := range entity.Attributes {
		if a.Modifier == "r" || (update && a.Modifier != "rw+" && !updatableInside(a.Embedded)) {
			continue
		}
		fl := &field{Name: a.Name, ID: "attr-" + a.Name, Description: a.Description, Modifier: a.Modifier,
			References: a.References, Required: a.Required && !update, Embedded: describeEmbedded(a.Embedded)}
		if len(a.Schema) > 0 {
			_ = json.Unmarshal(a.Schema, &fl.schema)
		}
		if len(a.Default) > 0 {
			fl.Default = compactJSON(a.Default)
		}
		s := fl.schema
		switch t := s.typeName(); {
		case len(s.Enum) > 0 || len(s.Const) > 0:
			fl.Kind = "select"
			choices := s.Enum
			if len(choices) == 0 {
				choices = []json.RawMessage{s.Const}
			}
			for _, c := range choices {
				fl.Options = append(fl.Options, option{Value: compactJSON(c), Label: label(c)})
			}
		case t == "string":
			fl.Kind, fl.Type = "text", t
			if p := s.patterns(); len(p) == 1 {
				fl.Pattern = p[0]
			}
			if s.MinLength != nil {
				fl.MinLength = *s.MinLength
			}
			if s.MaxLength != nil {
				fl.MaxLength = *s.MaxLength
			}
		case t == "integer" || t == "number":
			fl.Kind, fl.Type, fl.Step = "number", t, "any"
			if t == "integer" {
				fl.Step = "1"
			}
			if s.Minimum != nil {
				fl.Min = num(*s.Minimum)
			}
			if s.Maximum != nil {
				fl.Max = num(*s.Maximum)
			}
		case t == "boolean":
			fl.Kind = "checkbox"
		default:
			fl.Kind = "json"
		}
		if v, ok := values[a.Name]; ok {
			fl.show(v)
		} else if !update && fl.Kind == "checkbox" && fl.Default == "true" {
			fl.Checked = true
		}
		f.Fields = append(f.Fields, fl)
	}
	return f
}

// updatableInside reports whether the embedded entity e has an rw+
// attribute at some depth (under no r one).
func updatableInside(e *client.EmbeddedSpec) bool {
	if e == nil {
		return false
	}
	for _, a := range e.Attributes {
		if a.Modifier == "rw+" || a.Modifier != "r" && updatableInside(a.Embedded) {
			return true
		}
	}
	return false
}

// describeEmbedded says what an embedded attribute holds, for its
// field's help: "A list of entities, keyed by name: name (rw), mtu (rw+)."
func describeEmbedded(e *client.EmbeddedSpec) string {
	if e == nil {
		return ""
	}
	var b strings.Builder
	if e.List {
		b.WriteString("A list of entities")
		if len(e.Key) > 0 {
			b.WriteString(", keyed by " + strings.Join(e.Key, " and "))
		}
	} else {
		b.WriteString("An entity")
	}
	b.WriteString(": ")
	for i, a := range e.Attributes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.Name + " (" + a.Modifier)
		if a.Required && a.Modifier != "r" {
			b.WriteString(", required")
		}
		b.WriteString(")")
	}
	b.WriteString(".")
	return b.String()
}

// show puts a current value into the field's input.
func (fl *field) show(v any) {
	b, _ := json.Marshal(v)
	switch fl.Kind {
	case "checkbox":
		fl.Checked = v == true
	case "select":
		fl.Value = string(b)
	case "text":
		if s, ok := v.(string); ok {
			fl.Value = s
		} else {
			fl.Value = string(b)
		}
	default:
		fl.Value = string(b)
	}
	fl.mark()
}

// mark selects the option whose value is the field's.
func (fl *field) mark() {
	for i := range fl.Options {
		fl.Options[i].Selected = fl.Options[i].Value == fl.Value
	}
}

// parse reads the form's values from a submitted form into the fields
// (kept for the page shown again) and returns the attributes to send; a
// value the field's schema refuses sets its error. A text or number left
// empty, or a select on its empty choice, is not sent (on create the
// attribute takes its default, or the API says it is required).
func (f *form) parse(in url.Values) map[string]any {
	attrs := map[string]any{}
	for _, fl := range f.Fields {
		fl.Error = ""
		raw := in.Get(fl.ID)
		if fl.Kind == "checkbox" {
			fl.Checked = raw != ""
			attrs[fl.Name] = fl.Checked
			continue
		}
		fl.Value = raw
		if fl.Kind == "select" {
			fl.mark()
		}
		if strings.TrimSpace(raw) == "" && fl.Kind != "text" || raw == "" {
			continue
		}
		v, err := fl.value(raw)
		if err != "" {
			fl.Error = err
			continue
		}
		attrs[fl.Name] = v
	}
	return attrs
}

// value is the attribute's value of raw, or what is wrong with it.
func (fl *field) value(raw string) (any, string) {
	s := fl.schema
	switch fl.Kind {
	case "select":
		for _, o := range fl.Options {
			if o.Value == raw {
				var v any
				_ = json.Unmarshal([]byte(raw), &v)
				return v, ""
			}
		}
		return nil, "choose one of the listed values"
	case "number":
		raw = strings.TrimSpace(raw)
		var n float64
		var v any
		if fl.Type == "integer" {
			i, err := strconv.ParseInt(raw, 10, 64)
			if err != nil {
				return nil, fmt.Sprintf("%q is not a whole number", raw)
			}
			n, v = float64(i), i
		} else {
			x, err := strconv.ParseFloat(raw, 64)
			if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, fmt.Sprintf("%q is not a number", raw)
			}
			n, v = x, x
		}
		switch {
		case s.Minimum != nil && n < *s.Minimum:
			return nil, "must be at least " + num(*s.Minimum)
		case s.ExclusiveMinimum != nil && n <= *s.ExclusiveMinimum:
			return nil, "must be more than " + num(*s.ExclusiveMinimum)
		case s.Maximum != nil && n > *s.Maximum:
			return nil, "must be at most " + num(*s.Maximum)
		case s.ExclusiveMaximum != nil && n >= *s.ExclusiveMaximum:
			return nil, "must be less than " + num(*s.ExclusiveMaximum)
		}
		return v, ""
	case "text":
		if !utf8.ValidString(raw) {
			return nil, "not valid text (UTF-8)"
		}
		n := utf8.RuneCountInString(raw)
		if s.MinLength != nil && n < *s.MinLength {
			return nil, fmt.Sprintf("must be at least %d characters long", *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return nil, fmt.Sprintf("must be at most %d characters long", *s.MaxLength)
		}
		for _, p := range s.patterns() {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(raw) {
				return nil, "must match the pattern " + p
			}
		}
		return raw, ""
	}
	var v any
	d := json.NewDecoder(strings.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, "not valid JSON: " + err.Error()
	}
	if d.More() {
		return nil, "not valid JSON: more than one value"
	}
	return v, ""
}

// setErrors puts the API's field errors (JSON pointers /attributes/<name>)
// next to their fields, and keeps the others for the top of the form.
func (f *form) setErrors(p *client.Problem) {
	for _, e := range p.Errors {
		name, ok := strings.CutPrefix(e.Field, "/attributes/")
		if ok {
			// Inside an embedded entity (/attributes/routes/0/scheme): the
			// attribute's field, whose detail names the place.
			name, _, _ = strings.Cut(name, "/")
			name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
			if fl := f.field(name); fl != nil {
				if fl.Error != "" {
					fl.Error += "; "
				}
				fl.Error += e.Detail
				continue
			}
		}
		f.Errors = append(f.Errors, strings.TrimPrefix(e.Field, "/")+": "+e.Detail)
	}
}

func (f *form) field(name string) *field {
	for _, fl := range f.Fields {
		if fl.Name == name {
			return fl
		}
	}
	return nil
}

// changed are the attributes of attrs whose values differ from current.
func changed(attrs, current map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range attrs {
		if cur, ok := current[k]; !ok || !sameJSON(v, cur) {
			out[k] = v
		}
	}
	return out
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return string(b)
	}
	return out.String()
}

// label is a choice as a person reads it: a string without its quotes.
func label(b json.RawMessage) string {
	var s string
	if json.Unmarshal(b, &s) == nil {
		return s
	}
	return compactJSON(b)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
