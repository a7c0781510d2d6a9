package lsm

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// Allocation (issue 31): an r attribute declared @lsm(r, allocate=vlan)
// gets its value from the pool vlan when the instance is created: the
// lowest value no other live instance of the environment holds, written
// into the create's candidate set; the value is released when the
// instance is terminated. The model declares the pools (top-level
// pools: vlan: {kind: "vlan", from: 100, to: 199}); the store allocates
// (internal/store/lsm_alloc.go). This file is the pools' arithmetic.

// PoolKind is what a pool hands out.
type PoolKind string

// The kinds.
const (
	// PoolRange: the integers from From to To, both included.
	PoolRange PoolKind = "range"
	// PoolVLAN: a range of VLAN ids, within 1–4094.
	PoolVLAN PoolKind = "vlan"
	// PoolCIDR: the subnets of prefix length Size within Prefix, as
	// strings ("10.0.0.4/30"), aligned.
	PoolCIDR PoolKind = "cidr"
)

// poolName is what a pool may be called (it is an API path segment).
var poolName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// ValidPoolName reports whether s may name a pool.
func ValidPoolName(s string) bool { return poolName.MatchString(s) }

// maxPoolBits bounds a CIDR pool: at most 2^62 subnets, so that a count
// is an int64.
const maxPoolBits = 62

// Pool is a pool the model declares, as the catalog stores it.
type Pool struct {
	Name string   `json:"name"`
	Kind PoolKind `json:"kind"`
	// From and To bound a range or vlan pool (both included).
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	// Prefix and Size make a cidr pool: the subnets of length Size of
	// Prefix ("10.0.0.0/16", 30).
	Prefix string `json:"prefix,omitempty"`
	Size   int    `json:"size,omitempty"`
}

// Check says what is wrong with the pool's definition, or nil.
func (p Pool) Check() error {
	if !ValidPoolName(p.Name) {
		return fmt.Errorf("a pool's name is a letter and then letters, digits, '_' or '-'")
	}
	switch p.Kind {
	case PoolRange:
		if p.Prefix != "" || p.Size != 0 {
			return fmt.Errorf("a range pool has from and to, not prefix or size")
		}
		if p.From > p.To {
			return fmt.Errorf("from (%d) is above to (%d)", p.From, p.To)
		}
		if w := new(big.Int).Sub(big.NewInt(p.To), big.NewInt(p.From)); w.BitLen() > maxPoolBits {
			return fmt.Errorf("from %d to %d is too wide: at most 2^%d values", p.From, p.To, maxPoolBits)
		}
	case PoolVLAN:
		if p.Prefix != "" || p.Size != 0 {
			return fmt.Errorf("a vlan pool has from and to, not prefix or size")
		}
		if p.From < 1 || p.To > 4094 || p.From > p.To {
			return fmt.Errorf("a vlan pool is within 1–4094, from <= to (it is %d–%d)", p.From, p.To)
		}
	case PoolCIDR:
		if p.From != 0 || p.To != 0 {
			return fmt.Errorf("a cidr pool has prefix and size, not from or to")
		}
		pfx, err := netip.ParsePrefix(p.Prefix)
		if err != nil {
			return fmt.Errorf("prefix %q is not a CIDR prefix (10.0.0.0/16, 2001:db8::/48)", p.Prefix)
		}
		if pfx.Masked() != pfx {
			return fmt.Errorf("prefix %s has host bits set: %s", p.Prefix, pfx.Masked())
		}
		bits := pfx.Addr().BitLen()
		if p.Size < pfx.Bits() || p.Size > bits {
			return fmt.Errorf("size %d is not between the prefix's length %d and %d", p.Size, pfx.Bits(), bits)
		}
		if p.Size-pfx.Bits() > maxPoolBits {
			return fmt.Errorf("size %d makes 2^%d subnets of %s: at most 2^%d", p.Size, p.Size-pfx.Bits(), p.Prefix, maxPoolBits)
		}
	default:
		return fmt.Errorf("kind %q is none of range, vlan, cidr", p.Kind)
	}
	return nil
}

// Integer reports whether the pool's values are integers (range, vlan);
// a cidr pool's are strings.
func (p Pool) Integer() bool { return p.Kind != PoolCIDR }

// Count is how many values the pool holds (the pool is checked).
func (p Pool) Count() int64 {
	if p.Kind == PoolCIDR {
		pfx, _ := netip.ParsePrefix(p.Prefix)
		return int64(1) << (p.Size - pfx.Bits())
	}
	return p.To - p.From + 1
}

// Ordinals are the pool's values as numbers, for the store to find the
// lowest free one: an integer is itself, a subnet its address as an
// unsigned integer. The values are First, First+Step, ..., Last.

// First is the ordinal of the pool's first value.
func (p Pool) First() *big.Int {
	if p.Kind == PoolCIDR {
		pfx, _ := netip.ParsePrefix(p.Prefix)
		return new(big.Int).SetBytes(pfx.Addr().AsSlice())
	}
	return big.NewInt(p.From)
}

// Step is the distance between two values' ordinals.
func (p Pool) Step() *big.Int {
	if p.Kind == PoolCIDR {
		pfx, _ := netip.ParsePrefix(p.Prefix)
		return new(big.Int).Lsh(big.NewInt(1), uint(pfx.Addr().BitLen()-p.Size))
	}
	return big.NewInt(1)
}

// Last is the ordinal of the pool's last value.
func (p Pool) Last() *big.Int {
	n := new(big.Int).Mul(p.Step(), big.NewInt(p.Count()-1))
	return n.Add(n, p.First())
}

// Value is the value of ordinal o (one of the pool's), as it goes into
// an instance's attributes (an int64 or a string), and as text.
func (p Pool) Value(o *big.Int) (any, string) {
	if p.Kind != PoolCIDR {
		return o.Int64(), o.String()
	}
	pfx, _ := netip.ParsePrefix(p.Prefix)
	b := make([]byte, pfx.Addr().BitLen()/8)
	o.FillBytes(b)
	addr, _ := netip.AddrFromSlice(b)
	s := netip.PrefixFrom(addr, p.Size).String()
	return s, s
}

// Ordinal is the ordinal of v, a value as an instance holds it (a JSON
// number or string), and its text; ok is false when v is not one of
// the pool's values (outside it, or a subnet not of its size or not
// aligned).
func (p Pool) Ordinal(v any) (o *big.Int, text string, ok bool) {
	if p.Kind == PoolCIDR {
		s, isString := v.(string)
		if !isString {
			return nil, "", false
		}
		sub, err := netip.ParsePrefix(s)
		outer, _ := netip.ParsePrefix(p.Prefix)
		if err != nil || sub.Bits() != p.Size || sub.Masked() != sub || sub.Addr().Is4() != outer.Addr().Is4() ||
			!outer.Contains(sub.Addr()) {
			return nil, "", false
		}
		return new(big.Int).SetBytes(sub.Addr().AsSlice()), sub.String(), true
	}
	n, isInt := integer(v)
	if !isInt || n < p.From || n > p.To {
		return nil, "", false
	}
	return big.NewInt(n), strconv.FormatInt(n, 10), true
}

// integer is v as an int64 when it is an integral JSON number.
func integer(v any) (int64, bool) {
	r, ok := number(v)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}

// Describe is the pool's definition for people: "vlan 100–199",
// "cidr 10.0.0.0/16 by /30".
func (p Pool) Describe() string {
	if p.Kind == PoolCIDR {
		return fmt.Sprintf("cidr %s by /%d", p.Prefix, p.Size)
	}
	return fmt.Sprintf("%s %d–%d", p.Kind, p.From, p.To)
}

// Allocated reports whether spec is an attribute the server allocates
// from a pool.
func (spec AttributeSpec) Allocated() bool { return spec.Allocate != "" }

// HasAllocated reports whether any of specs is allocated from a pool.
func HasAllocated(specs []AttributeSpec) bool {
	for _, s := range specs {
		if s.Allocated() {
			return true
		}
	}
	return false
}

// CheckPools checks the pools of a model and the entities' attributes
// that allocate from them: every pool valid and named once, every
// allocate= naming one of them, on an r attribute whose type fits the
// pool's values (an integer for range and vlan, a string for cidr). It
// returns one message per problem, each prefixed by what it is about
// ("pools.vlan: ..." or "<entity>.<attribute>: ..."), sorted as found.
func CheckPools(pools []Pool, entities []Entity) []string {
	var out []string
	byName := map[string]Pool{}
	for _, p := range pools {
		if _, dup := byName[p.Name]; dup {
			out = append(out, fmt.Sprintf("pools.%s: declared twice", p.Name))
			continue
		}
		if err := p.Check(); err != nil {
			out = append(out, fmt.Sprintf("pools.%s: %v", p.Name, err))
		}
		byName[p.Name] = p
	}
	for _, e := range entities {
		for _, a := range e.Attributes {
			if a.Allocate == "" {
				continue
			}
			at := e.Name + "." + a.Name
			p, ok := byName[a.Allocate]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s: allocate=%s names no pool of the model (pools: %s)", at, a.Allocate, poolNames(pools)))
			case a.Modifier != ReadOnly:
				out = append(out, fmt.Sprintf("%s: an allocated attribute is the server's: it is r, not %s", at, a.Modifier))
			case !schemaAllows(a.Schema, p.Integer()):
				want := "an integer"
				if !p.Integer() {
					want = "a string"
				}
				out = append(out, fmt.Sprintf("%s: pool %s (%s) gives %s, which the attribute's type does not take", at, p.Name, p.Kind, want))
			}
		}
	}
	return out
}

func poolNames(pools []Pool) string {
	if len(pools) == 0 {
		return "none"
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// schemaAllows reports whether a JSON Schema's type takes integers
// (integer) or strings; a schema without a type takes anything.
func schemaAllows(schema json.RawMessage, integer bool) bool {
	types, anything := SchemaTypes(schema)
	if anything {
		return true
	}
	for _, t := range types {
		if integer && (t == "integer" || t == "number") || !integer && t == "string" {
			return true
		}
	}
	return false
}

// SchemaTypes are the JSON types a JSON Schema's "type" names (one, or a
// list); anything is true when it names none.
func SchemaTypes(schema json.RawMessage) (types []string, anything bool) {
	var s struct {
		Type any `json:"type"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || s.Type == nil {
		return nil, true
	}
	switch t := s.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok {
				types = append(types, str)
			}
		}
	}
	return types, false
}
