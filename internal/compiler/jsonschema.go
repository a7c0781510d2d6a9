package compiler

import (
	"encoding/json"
	"strings"

	"cuelang.org/go/cue"
)

// A JSON Schema (draft 2020-12) of the values a CUE value accepts, for
// the service catalog: it tells a client what an attribute looks like.
// The model remains what validates (an instance is compiled before it is
// accepted), so the schema may be looser than the CUE value, never
// stricter. It covers:
//
//   - type, from the value's kinds (int is "integer", float and number
//     are "number", bytes a base64 "string");
//   - a concrete scalar as const, a disjunction of them as enum, other
//     disjunctions as anyOf;
//   - bounds >=, >, <=, < as minimum, exclusiveMinimum, maximum,
//     exclusiveMaximum; =~ as pattern (several as allOf), !~ as
//     not-pattern; != "" on a string as minLength 1, other != as
//     not-const;
//   - strings.MinRunes/MaxRunes, list.MinItems/MaxItems and
//     struct.MinFields/MaxFields as minLength/maxLength, minItems/
//     maxItems, minProperties/maxProperties;
//   - structs: properties (with their doc comments as descriptions),
//     required (regular fields without a default), additionalProperties
//     from a pattern constraint ([string]: T) or false when the struct is
//     closed; lists: items from the element type ([...T]), prefixItems
//     from fixed elements;
//   - default, from the value's default.
//
// Not covered, and left out rather than guessed: other builtin
// validators (strings.HasPrefix, net.IP, ...), conditions between fields
// (if, comprehensions), patterns other than [string], references to
// other attributes, and nesting deeper than maxSchemaDepth. Regular
// expressions are CUE's (RE2); clients that validate with ECMA-262 may
// differ on rare syntax.

// maxSchemaDepth bounds the nesting a schema describes, so that a
// recursive definition ends.
const maxSchemaDepth = 8

// jsonSchema returns the schema of v.
func jsonSchema(v cue.Value) map[string]any {
	return schemaOf(v, 0)
}

func schemaOf(v cue.Value, depth int) map[string]any {
	s := map[string]any{}
	if depth > maxSchemaDepth {
		return s
	}
	kind := v.IncompleteKind()
	if t := schemaType(kind); t != nil {
		s["type"] = t
	}
	if kind&cue.BytesKind != 0 && kind&cue.StringKind == 0 {
		s["contentEncoding"] = "base64"
	}
	if isScalar(kind) && v.IsConcrete() {
		if b, err := v.MarshalJSON(); err == nil {
			s["const"] = json.RawMessage(b)
			return s
		}
	}
	op, args := expr(v)
	switch op {
	case cue.OrOp:
		disjunction(s, args, depth)
	case cue.AndOp:
		for _, a := range conjuncts(args) {
			constrain(s, a, kind, depth)
		}
	default:
		constrain(s, v, kind, depth)
	}
	switch {
	case kind == cue.StructKind:
		object(s, v, depth)
	case kind == cue.ListKind:
		array(s, v, depth)
	}
	if d, ok := v.Default(); ok {
		if b, err := d.MarshalJSON(); err == nil {
			s["default"] = json.RawMessage(b)
		}
	}
	return s
}

// expr is v.Expr() through what hides the expression: the NoOp with one
// argument it reports for a disjunction whose default another disjunct
// subsumes, and references (#Port, fs.#Mode), which it reports as a
// selection.
func expr(v cue.Value) (cue.Op, []cue.Value) {
	for range 6 {
		op, args := v.Expr()
		switch {
		case op == cue.NoOp && len(args) == 1:
			v = args[0]
		case op == cue.SelectorOp:
			root, path := v.ReferencePath()
			if len(path.Selectors()) == 0 {
				return op, args
			}
			v = root.LookupPath(path)
		default:
			return op, args
		}
	}
	return cue.NoOp, nil
}

// conjuncts flattens nested conjunctions.
func conjuncts(args []cue.Value) []cue.Value {
	var out []cue.Value
	for _, a := range args {
		if op, sub := expr(a); op == cue.AndOp {
			out = append(out, conjuncts(sub)...)
		} else {
			out = append(out, a)
		}
	}
	return out
}

func isScalar(k cue.Kind) bool {
	return k != cue.BottomKind && k&^(cue.NullKind|cue.BoolKind|cue.IntKind|cue.FloatKind|cue.StringKind) == 0
}

// schemaType is the JSON Schema type of a set of kinds: one name, a list
// of them, or nil for any.
func schemaType(k cue.Kind) any {
	if k == cue.TopKind || k == cue.BottomKind {
		return nil
	}
	var types []string
	for _, t := range []struct {
		kind cue.Kind
		name string
	}{
		{cue.NullKind, "null"}, {cue.BoolKind, "boolean"}, {cue.StringKind | cue.BytesKind, "string"},
		{cue.StructKind, "object"}, {cue.ListKind, "array"},
	} {
		if k&t.kind != 0 {
			types = append(types, t.name)
		}
	}
	switch {
	case k&cue.FloatKind != 0:
		types = append(types, "number")
	case k&cue.IntKind != 0:
		types = append(types, "integer")
	}
	if len(types) == 1 {
		return types[0]
	}
	return types
}

// disjunction describes a | b | ...: an enum when every disjunct is a
// concrete scalar, anyOf otherwise (a list of types when the disjuncts
// are plain types).
func disjunction(s map[string]any, args []cue.Value, depth int) {
	var enum []any
	for _, a := range args {
		if !isScalar(a.IncompleteKind()) || !a.IsConcrete() {
			enum = nil
			break
		}
		b, err := a.MarshalJSON()
		if err != nil {
			enum = nil
			break
		}
		enum = append(enum, json.RawMessage(b))
	}
	if enum != nil {
		s["enum"] = enum
		return
	}
	var alts []any
	plain := true
	for _, a := range args {
		sub := schemaOf(a, depth+1)
		alts = append(alts, sub)
		if _, hasType := sub["type"]; len(sub) != 1 || !hasType {
			plain = false
		}
	}
	if !plain {
		s["anyOf"] = alts
	}
}

// constrain adds what one conjunct says.
func constrain(s map[string]any, c cue.Value, kind cue.Kind, depth int) {
	op, args := expr(c)
	bound := func(key string) {
		if len(args) == 1 && args[0].IsConcrete() && args[0].IncompleteKind()&cue.NumberKind != 0 {
			if b, err := args[0].MarshalJSON(); err == nil {
				s[key] = json.RawMessage(b)
			}
		}
	}
	str := func() (string, bool) {
		if len(args) != 1 {
			return "", false
		}
		x, err := args[0].String()
		return x, err == nil
	}
	switch op {
	case cue.GreaterThanEqualOp:
		bound("minimum")
	case cue.GreaterThanOp:
		bound("exclusiveMinimum")
	case cue.LessThanEqualOp:
		bound("maximum")
	case cue.LessThanOp:
		bound("exclusiveMaximum")
	case cue.RegexMatchOp:
		if re, ok := str(); ok {
			if _, has := s["pattern"]; has {
				allOf(s, map[string]any{"pattern": re})
			} else {
				s["pattern"] = re
			}
		}
	case cue.NotRegexMatchOp:
		if re, ok := str(); ok {
			allOf(s, map[string]any{"not": map[string]any{"pattern": re}})
		}
	case cue.NotEqualOp:
		if x, ok := str(); ok && x == "" && kind == cue.StringKind {
			s["minLength"] = 1
		} else if len(args) == 1 && args[0].IsConcrete() {
			if b, err := args[0].MarshalJSON(); err == nil {
				allOf(s, map[string]any{"not": map[string]any{"const": json.RawMessage(b)}})
			}
		}
	case cue.CallOp:
		builtin(s, args)
	case cue.OrOp:
		sub := map[string]any{}
		disjunction(sub, args, depth)
		if len(sub) > 0 {
			allOf(s, sub)
		}
	}
}

// builtin reads the validators of the standard library that have a JSON
// Schema keyword: fn(n) where fn is pkg.Name.
func builtin(s map[string]any, args []cue.Value) {
	if len(args) != 2 {
		return
	}
	fop, fargs := args[0].Expr()
	if fop != cue.SelectorOp || len(fargs) != 2 {
		return
	}
	name, err := fargs[1].String()
	if err != nil {
		return
	}
	key, ok := map[string]string{
		"MinRunes": "minLength", "MaxRunes": "maxLength",
		"MinItems": "minItems", "MaxItems": "maxItems",
		"MinFields": "minProperties", "MaxFields": "maxProperties",
	}[name]
	if !ok {
		return
	}
	if n, err := args[1].Int64(); err == nil {
		s[key] = n
	}
}

func allOf(s map[string]any, sub map[string]any) {
	all, _ := s["allOf"].([]any)
	s["allOf"] = append(all, sub)
}

// object describes a struct's fields.
func object(s map[string]any, v cue.Value, depth int) {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	props := map[string]any{}
	var required []string
	for it.Next() {
		name := it.Selector().Unquoted()
		f := it.Value()
		sub := schemaOf(f, depth+1)
		if d := docText(f); d != "" {
			sub["description"] = d
		}
		props[name] = sub
		if _, hasDefault := fieldDefault(f); isRequired(it.Selector(), hasDefault) {
			required = append(required, name)
		}
	}
	if len(props) > 0 {
		s["properties"] = props
	}
	if len(required) > 0 {
		s["required"] = required
	}
	if p := v.LookupPath(cue.MakePath(cue.AnyString)); p.Exists() {
		if sub := schemaOf(p, depth+1); len(sub) > 0 { // not ...: any value
			s["additionalProperties"] = sub
		}
	} else if !v.Allows(cue.Str("\x00not a field\x00")) {
		s["additionalProperties"] = false
	}
}

// array describes a list's elements.
func array(s map[string]any, v cue.Value, depth int) {
	if it, err := v.List(); err == nil {
		var prefix []any
		for it.Next() {
			prefix = append(prefix, schemaOf(it.Value(), depth+1))
		}
		if len(prefix) > 0 {
			s["prefixItems"] = prefix
		}
	}
	if e := v.LookupPath(cue.MakePath(cue.AnyIndex)); e.Exists() {
		s["items"] = schemaOf(e, depth+1)
	} else if _, has := s["prefixItems"]; has {
		s["items"] = false
	}
}

// docText is the doc comment of a field, its comment groups (one per
// declaration) joined.
func docText(v cue.Value) string {
	var parts []string
	for _, g := range v.Doc() {
		if t := strings.TrimSpace(g.Text()); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n\n")
}

// fieldDefault is the value the model gives a field when an instance
// does not: its default, or its value when that is already concrete (a
// constant, an open list, a struct of defaults). ok is false when it has
// none.
func fieldDefault(f cue.Value) (json.RawMessage, bool) {
	if err := f.Validate(cue.Concrete(true)); err != nil {
		return nil, false
	}
	b, err := f.MarshalJSON()
	if err != nil {
		return nil, false
	}
	return b, true
}

// isRequired: a regular or required (!) field without a default.
func isRequired(sel cue.Selector, hasDefault bool) bool {
	return sel.ConstraintType() != cue.OptionalConstraint && !hasDefault
}
