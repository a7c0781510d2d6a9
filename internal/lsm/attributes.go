package lsm

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Modifier says what a client may do with an attribute (seed 003).
type Modifier string

// The modifiers.
const (
	// ReadOnly ("r"): allocated by the server; a client never sets it.
	ReadOnly Modifier = "r"
	// ReadWrite ("rw"): set at creation, read-only afterwards. The default.
	ReadWrite Modifier = "rw"
	// ReadWriteAlways ("rw+"): set at creation and changed by updates.
	ReadWriteAlways Modifier = "rw+"
)

// ParseModifier returns the modifier s spells: r, rw or rw+.
func ParseModifier(s string) (Modifier, error) {
	switch m := Modifier(s); m {
	case ReadOnly, ReadWrite, ReadWriteAlways:
		return m, nil
	}
	return "", fmt.Errorf("modifier %q is none of r, rw, rw+", s)
}

// AttributeSpec is one attribute of a service entity, as the catalog
// stores it.
type AttributeSpec struct {
	Name        string   `json:"name"`
	Modifier    Modifier `json:"modifier"`
	Description string   `json:"description,omitempty"`
	// Default is the value the model uses when the instance has none.
	Default json.RawMessage `json:"default,omitempty"`
	// Schema is a JSON Schema of the values the model accepts (for
	// clients: the model itself is what validates).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Required: the model needs a value and has no default.
	Required bool `json:"required"`
	// References names the entity whose instance (a string attribute)
	// or instances (a list of strings) the value names, by id or
	// identity: @lsm(rw, ref=site). See references.go.
	References string `json:"references,omitempty"`
	// Embedded: the attribute is an embedded entity, or a list of them,
	// whose own attributes have their own modifiers (embedded.go).
	Embedded *EmbeddedSpec `json:"embedded,omitempty"`
	// Allocate names the pool an r attribute's value is allocated from
	// when an instance is created: @lsm(r, allocate=vlan). See pool.go.
	Allocate string `json:"allocate,omitempty"`
}

// AttributeReason is why an attribute of a request is refused.
type AttributeReason string

// The reasons.
const (
	// ReasonUnknown: the entity has no such attribute.
	ReasonUnknown AttributeReason = "unknown"
	// ReasonReadOnly: an r attribute, which only the server sets.
	ReasonReadOnly AttributeReason = "read_only"
	// ReasonMissing: a required attribute without a value.
	ReasonMissing AttributeReason = "missing"
	// ReasonNotUpdatable: an update changes an attribute that is not rw+.
	ReasonNotUpdatable AttributeReason = "not_updatable"
	// ReasonNoSuchInstance: a reference names no live instance of its
	// entity (Detail says which value).
	ReasonNoSuchInstance AttributeReason = "no_such_instance"
)

// AttributeProblem is one attribute a request may not set (or leave out).
type AttributeProblem struct {
	// Attribute is the attribute's name; inside an embedded entity, its
	// dict path (interfaces[name=eth0].mtu).
	Attribute string `json:"attribute"`
	// Pointer is, inside an embedded entity, the JSON pointer of the
	// value in the attributes (/interfaces/0/mtu); "" for a top-level
	// attribute.
	Pointer string          `json:"pointer,omitempty"`
	Reason  AttributeReason `json:"reason"`
	// Modifier is the attribute's, when the entity has it.
	Modifier Modifier `json:"modifier,omitempty"`
	// Detail says more, where the reason alone does not
	// (ReasonNoSuchInstance).
	Detail string `json:"detail,omitempty"`
}

func (p AttributeProblem) String() string {
	switch p.Reason {
	case ReasonUnknown:
		return fmt.Sprintf("%s: no such attribute", p.Attribute)
	case ReasonReadOnly:
		return fmt.Sprintf("%s: read-only (r), set by the server", p.Attribute)
	case ReasonMissing:
		return fmt.Sprintf("%s: required", p.Attribute)
	case ReasonNotUpdatable:
		if p.Detail != "" {
			return fmt.Sprintf("%s: cannot change after creation (%s; only rw+ can): the update %s", p.Attribute, p.Modifier, p.Detail)
		}
		return fmt.Sprintf("%s: cannot change after creation (%s; only rw+ can)", p.Attribute, p.Modifier)
	case ReasonDuplicateKey:
		return fmt.Sprintf("%s: %s", p.Attribute, p.Detail)
	case ReasonNoSuchInstance:
		return fmt.Sprintf("%s: %s", p.Attribute, p.Detail)
	}
	return fmt.Sprintf("%s: %s", p.Attribute, p.Reason)
}

// AttributeError is a create or update that breaks the entity's
// attributes: the REST layer's 422, one entry per attribute, sorted by
// attribute.
type AttributeError struct {
	Problems []AttributeProblem
}

func (e *AttributeError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid attributes: " + strings.Join(parts, "; ")
}

// NewAttributeError returns an *AttributeError of problems (sorted), or
// nil when there are none.
func NewAttributeError(problems []AttributeProblem) error { return attributeError(problems) }

func attributeError(problems []AttributeProblem) error {
	if len(problems) == 0 {
		return nil
	}
	slices.SortStableFunc(problems, func(a, b AttributeProblem) int { return strings.Compare(a.Attribute, b.Attribute) })
	return &AttributeError{Problems: problems}
}

func specsByName(specs []AttributeSpec) map[string]AttributeSpec {
	m := make(map[string]AttributeSpec, len(specs))
	for _, s := range specs {
		m[s.Name] = s
	}
	return m
}

// CheckCreate checks the attributes of a create against the entity's:
// each must be one of them and not read-only, and every required one that
// is not read-only must be given (a read-only one is the server's to
// allocate). It returns an *AttributeError or nil. Whether the values
// are valid is the model's to say, when the instance is validated. The
// same holds inside embedded entities, at every depth, and the elements
// of an embedded list have distinct keys (embedded.go).
func CheckCreate(specs []AttributeSpec, attrs map[string]any) error {
	var problems []AttributeProblem
	checkCreateDict(specs, attrs, place{}, &problems)
	return attributeError(problems)
}

// CheckUpdate checks an update that turns the attributes current into
// next (the client's edits applied): every attribute it adds, removes or
// changes must be an rw+ attribute of the entity, and it may not remove a
// required one. Attributes it leaves as they are pass whatever they are
// (the server's r attributes, rw ones). Values are compared as JSON:
// numbers by value, whether decoded as float64 or json.Number. An
// embedded attribute is checked element by element, each attribute of
// it by its own modifier (embedded.go). It returns an *AttributeError or
// nil.
func CheckUpdate(specs []AttributeSpec, current, next map[string]any) error {
	var problems []AttributeProblem
	checkUpdateDict(specs, current, next, place{}, &problems)
	return attributeError(problems)
}

// sameJSON reports whether two decoded JSON values are equal, numbers
// compared by value.
func sameJSON(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x.Cmp(y) == 0
	}
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b) // strings, booleans, null
}

// number returns v as an exact rational if it is a JSON number.
func number(v any) (*big.Rat, bool) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case float64:
		s = strconv.FormatFloat(v, 'g', -1, 64)
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// WithDefaults returns attrs with the default of every attribute it lacks
// that has one (r attributes excepted: the server sets those), so that an
// instance's sets show the values the model uses. It returns a new map
// and does not change attrs; a default that is not valid JSON is skipped.
func WithDefaults(specs []AttributeSpec, attrs map[string]any) map[string]any {
	out := make(map[string]any, len(attrs)+len(specs))
	maps.Copy(out, attrs)
	for _, spec := range specs {
		if spec.Modifier == ReadOnly {
			continue
		}
		v, given := out[spec.Name]
		if !given {
			if len(spec.Default) == 0 || json.Unmarshal(spec.Default, &v) != nil {
				continue
			}
		}
		if spec.Embedded != nil {
			v = embeddedDefaults(spec.Embedded, v) // inside embedded entities too
		}
		out[spec.Name] = v
	}
	return out
}

// WithoutReadOnly returns attrs without the entity's r attributes: the
// model computes those, so a compile gets the others only (a value stored
// earlier would clash with the one the model computes now). Allocated
// ones stay (@lsm(r, allocate=pool)): the server chose them, and the
// model reads them. It returns attrs itself when it holds none. Inside
// embedded entities too: their r attributes are the model's as well.
func WithoutReadOnly(specs []AttributeSpec, attrs map[string]any) map[string]any {
	out, _ := withoutReadOnly(specs, attrs)
	return out
}

// ReadOnlyValues picks the entity's r attributes out of an instance's
// evaluated parameter (the compiler's), for the instance's sets; nil when
// there are none. An embedded attribute with r attributes inside is
// picked whole, as the model evaluated it: its r values are inside.
func ReadOnlyValues(specs []AttributeSpec, param map[string]any) map[string]any {
	var out map[string]any
	for _, spec := range specs {
		v, ok := param[spec.Name]
		if !ok || spec.Modifier != ReadOnly && (spec.Embedded == nil || !hasReadOnly(spec.Embedded)) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[spec.Name] = v
	}
	return out
}
