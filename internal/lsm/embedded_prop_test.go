package lsm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/intendhq/intend/dictpath"
)

// The properties of the modifiers at depth, on random entities (embedded
// entities and lists nested up to three deep, random modifiers) and random
// instances of them:
//
//   - a create of every writable attribute, and nothing else, passes;
//   - an update that changes nothing passes;
//   - changing one leaf passes exactly when it is rw+ and no embedded
//     attribute above it is r; otherwise the one problem names the leaf
//     (dict path and pointer) or the r attribute above it;
//   - adding or removing an element of a list passes exactly when the
//     list is rw+ and nothing above it is r (rw: the one problem is at
//     the list);
//   - WithoutReadOnly leaves no r value at any depth, and WithDefaults
//     adds nothing CheckCreate refuses.

type genEntity struct {
	r     *rand.Rand
	names int
}

func (g *genEntity) modifier() Modifier {
	return []Modifier{ReadOnly, ReadWrite, ReadWriteAlways}[g.r.IntN(3)]
}

func (g *genEntity) specs(depth int) []AttributeSpec {
	var out []AttributeSpec
	for i := range 1 + g.r.IntN(3) {
		g.names++
		a := AttributeSpec{Name: fmt.Sprintf("a%d_%d", i, g.names), Modifier: g.modifier(), Required: g.r.IntN(2) == 0}
		if depth < 3 && g.r.IntN(3) == 0 {
			a.Embedded = &EmbeddedSpec{Attributes: g.specs(depth + 1), List: g.r.IntN(2) == 0}
			if a.Embedded.List {
				a.Embedded.Attributes = append([]AttributeSpec{{Name: "key", Modifier: ReadWrite, Required: true}}, a.Embedded.Attributes...)
				a.Embedded.Key = []string{"key"}
			}
		}
		out = append(out, a)
	}
	return out
}

// instance is a value of every attribute of specs, r ones included when
// withR (as the server stores them), none when not (as a client creates).
func (g *genEntity) instance(specs []AttributeSpec, withR bool) map[string]any {
	out := map[string]any{}
	for _, a := range specs {
		if a.Modifier == ReadOnly && !withR {
			continue
		}
		out[a.Name] = g.value(a, withR)
	}
	return out
}

func (g *genEntity) value(a AttributeSpec, withR bool) any {
	switch {
	case a.Embedded == nil:
		return json.Number(strconv.Itoa(g.r.IntN(100)))
	case !a.Embedded.List:
		return g.instance(a.Embedded.Attributes, withR)
	}
	l := []any{}
	for i := range g.r.IntN(3) {
		el := g.instance(a.Embedded.Attributes, withR)
		el["key"] = "k" + strconv.Itoa(i)
		l = append(l, el)
	}
	return l
}

// leaf is a place in an instance: the path to it, its pointer, the
// attribute there, and whether an r attribute is above it.
type leaf struct {
	path    dictpath.Path
	ptr     string
	spec    AttributeSpec
	underR  bool
	topName string // the top-level attribute it is in
	rAt     leaf0  // the outermost r attribute above it, if underR
}

type leaf0 struct {
	path dictpath.Path
	ptr  string
}

// leaves lists every attribute value of attrs (at every depth), keys of
// list elements excepted (changing one is adding and removing).
func leaves(specs []AttributeSpec, attrs map[string]any, at leaf) []leaf {
	var out []leaf
	for _, a := range specs {
		v, ok := attrs[a.Name]
		if !ok {
			continue
		}
		l := leaf{path: at.path.Key(a.Name), ptr: at.ptr + "/" + escapeToken(a.Name), spec: a, underR: at.underR, topName: at.topName, rAt: at.rAt}
		if at.path.IsRoot() {
			l.topName = a.Name
		}
		if a.Modifier == ReadOnly && !l.underR {
			l.underR, l.rAt = true, leaf0{l.path, l.ptr}
		}
		if a.Embedded == nil {
			if a.Name != "key" || at.path.IsRoot() {
				out = append(out, l)
			}
			continue
		}
		out = append(out, l) // the embedded attribute itself: its elements come and go
		if !a.Embedded.List {
			out = append(out, leaves(a.Embedded.Attributes, v.(map[string]any), l)...)
			continue
		}
		for i, el := range v.([]any) {
			m := el.(map[string]any)
			p, _ := l.path.Where("key", m["key"])
			out = append(out, leaves(a.Embedded.Attributes, m, leaf{path: p, ptr: l.ptr + "/" + strconv.Itoa(i),
				underR: l.underR, topName: l.topName, rAt: l.rAt})...)
		}
	}
	return out
}

func TestModifiersAtDepth(t *testing.T) {
	t.Parallel()
	for seed := range uint64(400) {
		g := &genEntity{r: rand.New(rand.NewPCG(seed, 31))}
		specs := g.specs(0)
		create := g.instance(specs, false)
		if err := CheckCreate(specs, create); err != nil {
			t.Fatalf("seed %d: a create of every writable attribute is refused: %v\nspecs %s\nattrs %v", seed, err, js(specs), create)
		}
		if err := CheckCreate(specs, WithDefaults(specs, create)); err != nil {
			t.Fatalf("seed %d: the defaults are refused: %v", seed, err)
		}
		current := g.instance(specs, true)
		if err := CheckUpdate(specs, current, copyDict(current)); err != nil {
			t.Fatalf("seed %d: an update that changes nothing is refused: %v", seed, err)
		}
		noR := WithoutReadOnly(specs, current)
		for _, l := range leaves(specs, noR, leaf{}) {
			if l.spec.Modifier == ReadOnly {
				t.Fatalf("seed %d: WithoutReadOnly left %s", seed, l.path)
			}
		}
		for _, l := range leaves(specs, current, leaf{}) {
			checkLeafChange(t, seed, specs, current, l)
		}
	}
}

func checkLeafChange(t *testing.T, seed uint64, specs []AttributeSpec, current map[string]any, l leaf) {
	t.Helper()
	var next any
	var err error
	var change string
	switch {
	case l.spec.Embedded == nil:
		change = "changes " + l.path.String()
		next, err = dictpath.Replace(current, l.path, json.Number("1000"))
	case l.spec.Embedded.List:
		el := map[string]any{"key": "new"}
		for _, a := range l.spec.Embedded.Attributes {
			if a.Required && a.Modifier != ReadOnly && a.Name != "key" {
				el[a.Name] = (&genEntity{r: rand.New(rand.NewPCG(seed, 1))}).value(a, false)
			}
		}
		change = "adds an element to " + l.path.String()
		p, _ := l.path.Where("key", "new")
		next, err = dictpath.Replace(current, p, el)
	default:
		change = "removes " + l.path.String()
		next, err = dictpath.Remove(current, l.path)
	}
	if err != nil {
		t.Fatalf("seed %d: %s: %v", seed, change, err)
	}
	got := CheckUpdate(specs, current, next.(map[string]any))
	var want []AttributeProblem
	name := func(p dictpath.Path, ptr string, reason AttributeReason, mod Modifier, detail string) AttributeProblem {
		if p.Len() == 1 {
			return AttributeProblem{Attribute: l.topName, Reason: reason, Modifier: mod, Detail: detail}
		}
		return AttributeProblem{Attribute: p.String(), Pointer: ptr, Reason: reason, Modifier: mod, Detail: detail}
	}
	removed := l.spec.Embedded != nil && !l.spec.Embedded.List
	switch {
	case l.underR && removed && l.rAt.path.Equal(l.path) && l.path.Len() > 1:
		// an r value inside left out: the model computes it again
	case l.underR:
		want = []AttributeProblem{name(l.rAt.path, l.rAt.ptr, ReasonReadOnly, ReadOnly, "")}
	case l.spec.Modifier == ReadWriteAlways:
		if removed && l.spec.Required {
			want = []AttributeProblem{name(l.path, l.ptr, ReasonMissing, ReadWriteAlways, "")}
		}
	case l.spec.Embedded != nil && l.spec.Embedded.List:
		p, _ := l.path.Where("key", "new")
		want = []AttributeProblem{name(l.path, l.ptr, ReasonNotUpdatable, l.spec.Modifier, "adds "+p.String())}
	default:
		want = []AttributeProblem{name(l.path, l.ptr, ReasonNotUpdatable, l.spec.Modifier, "")}
	}
	if want == nil {
		if got != nil {
			t.Fatalf("seed %d: an update that %s (%s) is refused: %v\nspecs %s", seed, change, l.spec.Modifier, got, js(specs))
		}
		return
	}
	ae, ok := got.(*AttributeError)
	if !ok || len(ae.Problems) != 1 || ae.Problems[0] != want[0] {
		t.Fatalf("seed %d: an update that %s: %v, want %+v\nspecs %s", seed, change, got, want[0], js(specs))
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// FuzzEmbeddedRules feeds the rules arbitrary JSON as an instance of
// routerSpecs (any shape at any depth: the model validates types, the
// rules must not trip over them): none panics; an update that changes
// nothing passes; every problem inside an embedded entity has a dict path
// that parses and a pointer; WithoutReadOnly and WithDefaults leave their
// input as it was.
func FuzzEmbeddedRules(f *testing.F) {
	f.Add([]byte(`{"name":"r1","interfaces":[{"name":"eth0","mac":"aa","address":{"ip":"x"}}],"uplinks":[{"port":1,"proto":"tcp"}],"mgmt":{"host":"h"}}`),
		[]byte(`{"name":"r1","interfaces":[{"name":"eth0","vlan":3},{"name":"eth0"}],"uplinks":[{"port":1.0,"proto":"tcp"},{"port":2}],"mgmt":[]}`))
	f.Add([]byte(`{"interfaces":[1,null,{"name":{"a":1}},{"name":"a.b[c]"}],"uplinks":"x","mgmt":{"token":"t"}}`), []byte(`{"interfaces":null}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var cur, next map[string]any
		if json.Unmarshal(a, &cur) != nil || json.Unmarshal(b, &next) != nil {
			return
		}
		before := copyDict(cur)
		if err := CheckUpdate(routerSpecs, cur, copyDict(cur)); err != nil {
			t.Fatalf("an update that changes nothing: %v", err)
		}
		for _, err := range []error{CheckCreate(routerSpecs, cur), CheckUpdate(routerSpecs, cur, next)} {
			ae, ok := err.(*AttributeError)
			if err != nil && !ok {
				t.Fatalf("not an *AttributeError: %v", err)
			}
			if ae == nil {
				continue
			}
			for _, p := range ae.Problems {
				if p.Pointer == "" {
					continue
				}
				if _, err := dictpath.Parse(p.Attribute); err != nil {
					t.Errorf("%+v: the path does not parse: %v", p, err)
				}
				if p.Pointer[0] != '/' {
					t.Errorf("%+v: not a pointer", p)
				}
			}
		}
		WithDefaults(routerSpecs, cur)
		WithoutReadOnly(routerSpecs, cur)
		RestoreAttributes(routerSpecs, cur, next)
		if !sameJSON(cur, before) {
			t.Fatalf("the rules changed their input: %v, was %v", cur, before)
		}
	})
}
