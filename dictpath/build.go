package dictpath

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Building paths: a program that walks a document (the lifecycle's
// attribute checks) names what it finds with the same paths a client
// writes, so that a problem at interfaces[name=eth0].mtu reads as the edit
// that would fix it. Each method returns a new Path and leaves p as it is.

// Key returns p followed by the member key of the dict p selects.
func (p Path) Key(key string) Path {
	return Path{append(slices.Clone(p.elems), element{key: key})}
}

// Index returns p with its last element selecting element i of the list
// there: p.Key("items").Index(2) is items[2]. It panics when p is the
// root, when its last element selects already, or when i is negative.
func (p Path) Index(i int) Path {
	if i < 0 {
		panic(fmt.Sprintf("dictpath: index %d", i))
	}
	q := p.lastBare("Index")
	q.elems[len(q.elems)-1].sel, q.elems[len(q.elems)-1].index = selIndex, i
	return q
}

// Where returns p with its last element selecting, in the list there, the
// element whose member key is value: a string, a bool, a number (float64,
// json.Number, int or int64) or nil (written \0). Filters add up:
// p.Key("ports").Where("proto", "tcp").Where("port", 80) is
// ports[port=80,proto=tcp]. ok is false, and p is returned as it is, when
// value is of another type (a dict or a list matches no filter) or key is
// filtered on already. It panics when p is the root or its last element
// selects by index.
func (p Path) Where(key string, value any) (q Path, ok bool) {
	f := filter{key: key}
	switch v := value.(type) {
	case nil:
		f.kind = valNull
	case string:
		f.text = v
	case bool:
		f.text = strconv.FormatBool(v)
	case json.Number:
		f.text = v.String()
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return p, false
		}
		f.text = strconv.FormatFloat(v, 'g', -1, 64)
	case int:
		f.text = strconv.Itoa(v)
	case int64:
		f.text = strconv.FormatInt(v, 10)
	default:
		return p, false
	}
	if f.kind == valText {
		f.num, f.numOK = canonNumber(f.text)
	}
	if len(p.elems) > 0 {
		last := p.elems[len(p.elems)-1]
		if last.sel == selFilter {
			if slices.ContainsFunc(last.filters, func(g filter) bool { return g.key == key }) {
				return p, false
			}
			q = Path{slices.Clone(p.elems)}
			e := &q.elems[len(q.elems)-1]
			e.filters = append(slices.Clone(e.filters), f)
			slices.SortFunc(e.filters, func(f, g filter) int { return strings.Compare(f.key, g.key) })
			return q, true
		}
	}
	q = p.lastBare("Where")
	e := &q.elems[len(q.elems)-1]
	e.sel, e.filters = selFilter, []filter{f}
	return q, true
}

// lastBare is a copy of p whose last element selects nothing; it panics
// otherwise (op names the caller).
func (p Path) lastBare(op string) Path {
	if len(p.elems) == 0 {
		panic("dictpath: " + op + " on the root, which is no list")
	}
	if p.elems[len(p.elems)-1].sel != selNone {
		panic("dictpath: " + op + " on " + p.String() + ", which selects already")
	}
	return Path{slices.Clone(p.elems)}
}
