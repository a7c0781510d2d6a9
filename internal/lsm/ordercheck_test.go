package lsm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Property tests of CheckOrder: random orders against random inventories,
// checked against orderModel, the rules written again in the plainest
// way (a list of predicates per item), and against invariants that hold
// whatever the rules: accepted orders come back item for item, with
// dependencies in range and acyclic; the same input gives the same
// output; a snapshot gathered key by key through OrderLookups gives
// what the whole snapshot gives.

// seeds is how many random cases TestCheckOrderProperties runs
// (ORDERCHECK_SEEDS overrides: a long run when the rules change).
func seeds(t *testing.T) int {
	if s := os.Getenv("ORDERCHECK_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("ORDERCHECK_SEEDS=%q: %v", s, err)
		}
		return n
	}
	if testing.Short() {
		return 500
	}
	return 5000
}

func TestCheckOrderProperties(t *testing.T) {
	t.Parallel()
	base := rand.Uint64()
	if s := os.Getenv("ORDERCHECK_SEED"); s != "" {
		var err error
		if base, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("ORDERCHECK_SEED=%q: %v", s, err)
		}
	}
	accepted, seen := 0, map[string]int{}
	for n := range uint64(seeds(t)) {
		seed := base + n
		g := orderGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), clean: seed%2 == 0}
		inv := g.inventory()
		req := g.request(inv)
		if ok := checkOrderCase(t, req, inv); !ok {
			body, _ := json.MarshalIndent(req, "", "  ")
			t.Fatalf("seed %d (rerun: ORDERCHECK_SEED=%d ORDERCHECK_SEEDS=1 go test -run TestCheckOrderProperties ./internal/lsm/)\norder: %s",
				seed, seed, body)
		}
		items, problems := CheckOrder(req, inv, counter())
		if items != nil {
			accepted++
		}
		for _, p := range problems {
			for _, k := range ruleKinds {
				if strings.Contains(p.Field+" "+p.Detail, k) {
					seen[k]++
				}
			}
		}
		if len(OrderLookups(req, inv).EntityVersions) > 0 {
			seen["an update of an older version"]++
		}
	}
	// Every rule must be broken now and then, or the test proves
	// little of it.
	for _, k := range append(ruleKinds, "an update of an older version") {
		if seen[k] == 0 {
			t.Errorf("no random order had a problem with %q: the generator misses a rule", k)
		}
	}
	// The generator must reach both outcomes often, or the test proves
	// little.
	if total := seeds(t); accepted < total/20 || accepted > total*19/20 {
		t.Errorf("%d of %d random orders accepted: the generator is off balance", accepted, total)
	}
}

// ruleKinds are a word of every rule's problem, each of which the random
// orders must have now and then.
var ruleKinds = []string{
	`required: "all_or_nothing"`, `must be "all_or_nothing"`, "required: at least one item",
	"required: the item's id", "must be 1 to 100", "duplicate: item",
	`required: "create"`, `must be "create"`, "required: the service entity", "the catalog has no service entity",
	"a create names no instance", "a create takes attributes, not edits",
	": no such attribute", ": read-only (r)", ": required", "cannot change after creation",
	"creates the", "a live ", "required: the instance's id", "the inventory has no", "it takes no more requests",
	"on the same instance", "a delete takes no attributes", "not both", "required: the attributes to change",
	"/edit/", "names no live", "the order has no item", "cannot depend on itself", "a dependency cycle",
	"is not an initial state of the lifecycle", "only a create begins in an initial state",
}

// checkOrderCase checks one case; it reports (t.Errorf) every property
// that fails and returns false if any did.
func checkOrderCase(t *testing.T, req OrderRequest, inv OrderInventory) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	items, problems := CheckOrder(req, inv, counter())

	// Against the model.
	want, wantCycle := orderModel(req, inv)
	got := problems
	var cycle *FieldProblem
	if n := len(got); n > 0 && strings.HasPrefix(got[n-1].Detail, "a dependency cycle: ") {
		cycle, got = &got[n-1], got[:n-1]
	}
	if !slices.Equal(got, want) {
		fail("problems:\n got  %s\n want %s", problemList(got), problemList(want))
	}
	if (cycle != nil) != wantCycle {
		fail("cycle reported: %v, the model finds one: %v (%v)", cycle != nil, wantCycle, cycle)
	}
	if cycle != nil {
		if err := validCycle(req, *cycle); err != nil {
			fail("cycle %v: %v", *cycle, err)
		}
	}

	// Exactly one of items and problems.
	if (items == nil) == (problems == nil) {
		fail("items %v and problems %v: want exactly one", items != nil, problems != nil)
	}
	// Accepted: the items, in order, as sent.
	if items != nil {
		ids := counter()
		if len(items) != len(req.Items) {
			fail("%d items for %d", len(items), len(req.Items))
			return false
		}
		for i, it := range req.Items {
			got := items[i]
			spec, _ := json.Marshal(it)
			if got.ItemID != it.ID || got.Operation != it.Operation || got.Entity != it.ServiceEntity || string(got.Spec) != string(spec) {
				fail("item %d is %+v, sent %+v", i, got, it)
			}
			switch it.Operation {
			case OpCreate:
				if id := ids(); got.InstanceID != id {
					fail("item %d: create's instance %q, want %q (newID in item order)", i, got.InstanceID, id)
				}
			default:
				if inst := inv.Instances[InstanceKey{it.ServiceEntity, it.Instance}]; got.InstanceID != inst.ID || inst.Deleted {
					fail("item %d: instance %q, want the live %q", i, got.InstanceID, inst.ID)
				}
			}
			for _, d := range got.Deps {
				if d < 0 || d >= len(items) || d == i {
					fail("item %d depends on %d", i, d)
					return false
				}
				if !slices.Contains(it.DependsOn, req.Items[d].ID) {
					fail("item %d depends on %d, which it does not name", i, d)
				}
			}
		}
		deps := make([][]int, len(items))
		for i := range items {
			deps[i] = items[i].Deps
		}
		if !acyclic(deps) {
			fail("accepted with a dependency cycle: %v", deps)
		}
	}

	// Deterministic, whatever the maps' order: the same input again,
	// the inventory rebuilt, give the same output.
	items2, problems2 := CheckOrder(req, rebuild(inv), counter())
	if !reflect.DeepEqual(items, items2) || !reflect.DeepEqual(problems, problems2) {
		fail("not deterministic:\n%v %s\n%v %s", items, problemList(problems), items2, problemList(problems2))
	}

	// The snapshot gathered as the API gathers it (the keys
	// OrderLookups names, until it names none new) is as good as the
	// whole inventory.
	part, rounds := gather(req, inv)
	if rounds > 5 {
		fail("gathered in %d rounds, want at most 4 (and one that reads nothing)", rounds)
	}
	items3, problems3 := CheckOrder(req, part, counter())
	if !reflect.DeepEqual(items, items3) || !reflect.DeepEqual(problems, problems3) {
		fail("the gathered snapshot checks differently:\n%v %s\n%v %s", items, problemList(problems), items3, problemList(problems3))
	}
	return ok
}

// gather builds a snapshot of inv as gatherOrderInventory does: the keys
// OrderLookups names, until it names none not read yet.
func gather(req OrderRequest, inv OrderInventory) (OrderInventory, int) {
	part := OrderInventory{Entities: map[string]Entity{}, EntityVersions: map[VersionKey]Entity{},
		Instances: map[InstanceKey]Instance{}, Live: map[InstanceKey]bool{}}
	read := map[any]bool{}
	for round := 1; ; round++ {
		need := OrderLookups(req, part)
		progress := false
		for _, k := range need.Entities {
			if !read[k] {
				read[k], progress = true, true
				if e, ok := inv.Entities[k]; ok {
					part.Entities[k] = e
				}
			}
		}
		for _, k := range need.EntityVersions {
			if !read[k] {
				read[k], progress = true, true
				if e, ok := inv.EntityVersions[k]; ok {
					part.EntityVersions[k] = e
				}
			}
		}
		for _, k := range need.Instances {
			if !read[k] {
				read[k], progress = true, true
				if e, ok := inv.Instances[k]; ok {
					part.Instances[k] = e
				}
			}
		}
		for _, k := range need.References {
			if !read[referenceKey(k)] {
				read[referenceKey(k)], progress = true, true
				if inv.Live[k] {
					part.Live[k] = true
				}
			}
		}
		if !progress || round > 10 {
			return part, round
		}
	}
}

// orderModel is the rules of an order, written again without looking at
// CheckOrder's structure: the problems an order has, in the order the
// API lists them (each item's own, then the references, then the
// dependencies), but for the dependency cycle, which only the model's
// second result says exists (validCycle checks the one reported).
// Attribute checks are modelled here too; edits are dictpath's (tested
// there), so the model takes ApplyEdits' result.
func orderModel(req OrderRequest, inv OrderInventory) (problems []FieldProblem, cycle bool) {
	add := func(field, detail string) { problems = append(problems, FieldProblem{field, detail}) }
	if req.Policy != "all_or_nothing" && req.Policy != "best_effort" {
		if req.Policy == "" {
			add("/policy", `required: "all_or_nothing" or "best_effort"`)
		} else {
			add("/policy", `must be "all_or_nothing" or "best_effort"`)
		}
	}
	if len(req.Items) == 0 {
		add("/items", "required: at least one item")
	}
	if len(req.Items) > 10000 {
		add("/items", fmt.Sprintf("an order holds at most 10000 items, not %d", len(req.Items)))
	}
	if problems != nil {
		return problems, false
	}

	validID := func(id string) bool {
		if len(id) == 0 || len(id) > 100 || !isAlnum(id[0]) {
			return false
		}
		for _, c := range []byte(id) {
			if !isAlnum(c) && !strings.ContainsRune("._:/-", rune(c)) {
				return false
			}
		}
		return true
	}
	firstWithID := func(id string) int {
		return slices.IndexFunc(req.Items, func(it OrderItemRequest) bool { return it.ID == id })
	}
	type refCheck struct {
		at    string
		specs []AttributeSpec
		attrs map[string]any
	}
	var refChecks []refCheck
	type creation struct {
		item          int
		entity, ident string
	}
	var creations []creation
	onInstance := map[string]int{}

	for i, it := range req.Items {
		at := fmt.Sprintf("/items/%d", i)
		switch {
		case it.ID == "":
			add(at+"/id", "required: the item's id, unique in the order")
		case !validID(it.ID):
			add(at+"/id", "must be 1 to 100 letters, digits and . _ : / -, starting with a letter or digit")
		case firstWithID(it.ID) < i:
			add(at+"/id", fmt.Sprintf("duplicate: item %d has the id %q", firstWithID(it.ID), it.ID))
		}
		if !slices.Contains([]string{"create", "update", "delete"}, it.Operation) {
			if it.Operation == "" {
				add(at+"/operation", `required: "create", "update" or "delete"`)
			} else {
				add(at+"/operation", `must be "create", "update" or "delete"`)
			}
			continue
		}
		ent, known := inv.Entities[it.ServiceEntity]
		if it.ServiceEntity == "" {
			add(at+"/service_entity", "required: the service entity")
			continue
		}
		if !known {
			add(at+"/service_entity", fmt.Sprintf("the catalog has no service entity %q", it.ServiceEntity))
			continue
		}
		if it.Operation == "create" {
			if it.Instance != "" {
				add(at+"/instance", "a create names no instance: the order gives the new one its id")
			}
			if it.Edit != nil {
				add(at+"/edit", "a create takes attributes, not edits")
			}
			// A create begins in the lifecycle's start state or one of
			// its initial_states; another is refused, listing those
			// (the start state first, each once).
			lc := ent.Lifecycle
			if s := it.InitialState; s != "" && s != lc.Start && !slices.Contains(lc.InitialStates, s) {
				add(at+"/initial_state", fmt.Sprintf("%q is not an initial state of the lifecycle", s))
				listed := []string{}
				for _, st := range append([]string{lc.Start}, lc.InitialStates...) {
					if !slices.Contains(listed, st) {
						listed = append(listed, st)
						add(at+"/initial_state", fmt.Sprintf("allowed: %q", st))
					}
				}
			}
			for _, p := range modelCreate(ent.Attributes, it.Attributes) {
				add(at+"/attributes/"+p.Field, p.Detail)
			}
			refChecks = append(refChecks, refCheck{at, ent.Attributes, it.Attributes})
			ident := modelIdentity(ent, it.Attributes)
			if ident == "" {
				continue
			}
			field := at + "/attributes/" + strings.ReplaceAll(strings.ReplaceAll(ent.Identity, "~", "~0"), "/", "~1")
			last := -1
			for _, c := range creations {
				if c.entity == ent.Name && c.ident == ident {
					last = c.item
				}
			}
			_, taken := inv.Instances[InstanceKey{ent.Name, ident}]
			switch {
			case last >= 0:
				add(field, fmt.Sprintf("item %d creates the %s with identity %q too", last, ent.Name, ident))
			case taken:
				add(field, fmt.Sprintf("a live %s has the identity %q", ent.Name, ident))
			}
			creations = append(creations, creation{i, ent.Name, ident})
			continue
		}
		if it.InitialState != "" {
			add(at+"/initial_state", "only a create begins in an initial state: an update or a delete takes none")
		}
		inst, found := inv.Instances[InstanceKey{ent.Name, it.Instance}]
		switch j, twice := onInstance[inst.ID]; {
		case it.Instance == "":
			add(at+"/instance", "required: the instance's id or identity")
			continue
		case !found:
			add(at+"/instance", fmt.Sprintf("the inventory has no %s %q", ent.Name, it.Instance))
			continue
		case inst.Deleted:
			add(at+"/instance", fmt.Sprintf("%s %s is %s: it takes no more requests", ent.Name, inst.ID, inst.State))
			continue
		case twice:
			add(at+"/instance", fmt.Sprintf("item %d is on the same instance: an order has one item per instance", j))
			continue
		}
		onInstance[inst.ID] = i
		if it.Operation == "delete" {
			if it.Attributes != nil || it.Edit != nil {
				add(at, "a delete takes no attributes or edits")
			}
			continue
		}
		current, version := inst.Active, inst.ActiveVersion
		if inst.Candidate != nil {
			current, version = inst.Candidate, inst.CandidateVersion
		}
		version = max(version, 1)
		var next map[string]any
		switch {
		case len(it.Attributes) > 0 && len(it.Edit) > 0:
			add(at, "an update takes attributes (as PATCH /lsm/v1) or edit (as PATCH /lsm/v2), not both")
			continue
		case len(it.Attributes) == 0 && len(it.Edit) == 0:
			add(at+"/attributes", "required: the attributes to change, by name (or edit, a list of dict-path edits)")
			continue
		case len(it.Attributes) > 0:
			next = map[string]any{}
			for k, v := range current {
				next[k] = v
			}
			for k, v := range it.Attributes {
				next[k] = v
			}
		default:
			var err error
			next, err = ApplyEdits(current, it.Edit)
			var ee *EditError
			if errors.As(err, &ee) {
				if ee.Index < 0 {
					add(at+"/edit", ee.Detail)
				} else {
					add(fmt.Sprintf("%s/edit/%d%s", at, ee.Index, ee.Field), ee.Detail)
				}
				continue
			}
		}
		specs := ent.Attributes
		if version != max(ent.Version, 1) {
			old, ok := inv.EntityVersions[VersionKey{ent.Name, version}]
			if !ok {
				add(at+"/instance", fmt.Sprintf("%s %s is of version %d of its entity, which the catalog does not have", ent.Name, inst.ID, version))
				continue
			}
			specs = old.Attributes
		}
		for _, p := range modelUpdate(specs, current, next) {
			add(at+"/attributes/"+p.Field, p.Detail)
		}
		changed := map[string]any{}
		for k, v := range next {
			if old, ok := current[k]; !ok || fmt.Sprint(old) != fmt.Sprint(v) {
				changed[k] = v
			}
		}
		refChecks = append(refChecks, refCheck{at, ent.Attributes, changed})
	}

	for _, rc := range refChecks {
		specs := slices.Clone(rc.specs)
		slices.SortStableFunc(specs, func(a, b AttributeSpec) int { return strings.Compare(a.Name, b.Name) })
		for _, s := range specs {
			if s.References == "" {
				continue
			}
			var values []string
			switch v := rc.attrs[s.Name].(type) {
			case string:
				values = []string{v}
			case []any:
				for _, e := range v {
					if e, ok := e.(string); ok {
						values = append(values, e)
					}
				}
			}
			for _, v := range values {
				created := slices.ContainsFunc(creations, func(c creation) bool { return c.entity == s.References && c.ident == v })
				if !created && !inv.Live[InstanceKey{s.References, v}] {
					add(rc.at+"/attributes/"+s.Name, fmt.Sprintf("%s: names no live %s instance (%q): a reference names one by id or identity",
						s.Name, s.References, v))
				}
			}
		}
	}

	depsOK := true
	edges := make([][]int, len(req.Items))
	for i, it := range req.Items {
		for k, d := range it.DependsOn {
			field := fmt.Sprintf("/items/%d/depends_on/%d", i, k)
			j := slices.IndexFunc(req.Items, func(o OrderItemRequest) bool { return o.ID == d && validID(d) })
			switch {
			case j < 0:
				add(field, fmt.Sprintf("the order has no item %q", d))
				depsOK = false
			case j == i:
				add(field, "an item cannot depend on itself")
				depsOK = false
			default:
				edges[i] = append(edges[i], j)
			}
		}
	}
	return problems, depsOK && !acyclic(edges)
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// modelCreate: every attribute given is the entity's and not r; every
// required one that is not r is given. Fields are attribute names.
func modelCreate(specs []AttributeSpec, attrs map[string]any) []FieldProblem {
	var out []FieldProblem
	names := map[string]bool{}
	for n := range attrs {
		names[n] = true
	}
	for _, s := range specs {
		names[s.Name] = true
	}
	for _, n := range slices.Sorted(mapKeys(names)) {
		s, known := modelSpec(specs, n)
		_, given := attrs[n]
		switch {
		case given && !known:
			out = append(out, FieldProblem{n, n + ": no such attribute"})
		case given && s.Modifier == ReadOnly:
			out = append(out, FieldProblem{n, n + ": read-only (r), set by the server"})
		case !given && s.Required && s.Modifier != ReadOnly:
			out = append(out, FieldProblem{n, n + ": required"})
		}
	}
	return out
}

// modelUpdate: every attribute the update changes (adds, removes or
// sets to another value) is the entity's and rw+, and a required one is
// not removed.
func modelUpdate(specs []AttributeSpec, current, next map[string]any) []FieldProblem {
	var out []FieldProblem
	names := map[string]bool{}
	for n := range current {
		names[n] = true
	}
	for n := range next {
		names[n] = true
	}
	for _, n := range slices.Sorted(mapKeys(names)) {
		cur, inCur := current[n]
		nxt, inNext := next[n]
		if inCur && inNext && reflect.DeepEqual(cur, nxt) {
			continue
		}
		s, known := modelSpec(specs, n)
		switch {
		case !known:
			out = append(out, FieldProblem{n, n + ": no such attribute"})
		case s.Modifier == ReadOnly:
			out = append(out, FieldProblem{n, n + ": read-only (r), set by the server"})
		case s.Modifier != ReadWriteAlways:
			out = append(out, FieldProblem{n, fmt.Sprintf("%s: cannot change after creation (%s; only rw+ can)", n, s.Modifier)})
		case !inNext && s.Required:
			out = append(out, FieldProblem{n, n + ": required"})
		}
	}
	return out
}

func modelSpec(specs []AttributeSpec, name string) (AttributeSpec, bool) {
	i := slices.IndexFunc(specs, func(s AttributeSpec) bool { return s.Name == name })
	if i < 0 {
		return AttributeSpec{}, false
	}
	return specs[i], true
}

// modelIdentity: the identity attribute's value, given or else its
// default (the generator's identities are strings).
func modelIdentity(ent Entity, attrs map[string]any) string {
	if ent.Identity == "" {
		return ""
	}
	if v, ok := attrs[ent.Identity].(string); ok {
		return v
	}
	if _, given := attrs[ent.Identity]; given {
		panic("the generator gives string identities only")
	}
	s, ok := modelSpec(ent.Attributes, ent.Identity)
	if !ok || s.Modifier == ReadOnly || s.Default == nil {
		return ""
	}
	var v string
	if err := json.Unmarshal(s.Default, &v); err != nil {
		panic(err)
	}
	return v
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// acyclic reports whether deps has no cycle (Kahn: items without
// dependencies left go first).
func acyclic(deps [][]int) bool {
	done := make([]bool, len(deps))
	for left := len(deps); left > 0; {
		progress := false
		for i, ds := range deps {
			if !done[i] && !slices.ContainsFunc(ds, func(d int) bool { return !done[d] }) {
				done[i], progress = true, true
				left--
			}
		}
		if !progress {
			return false
		}
	}
	return true
}

// validCycle checks a reported cycle: at one of its item's depends_on,
// naming items that each depend on the next, back to the first.
func validCycle(req OrderRequest, p FieldProblem) error {
	var i, k int
	if _, err := fmt.Sscanf(p.Field, "/items/%d/depends_on/%d", &i, &k); err != nil {
		return fmt.Errorf("field: %v", err)
	}
	names := strings.Split(strings.TrimPrefix(p.Detail, "a dependency cycle: "), " → ")
	if len(names) < 3 || names[0] != names[len(names)-1] || names[0] != req.Items[i].ID {
		return fmt.Errorf("not a cycle from item %d", i)
	}
	if i >= len(req.Items) || k >= len(req.Items[i].DependsOn) || req.Items[i].DependsOn[k] != names[1] {
		return fmt.Errorf("the field is not the first edge %s → %s", names[0], names[1])
	}
	for n := 0; n+1 < len(names); n++ {
		j := slices.IndexFunc(req.Items, func(it OrderItemRequest) bool { return it.ID == names[n] })
		if j < 0 || !slices.Contains(req.Items[j].DependsOn, names[n+1]) {
			return fmt.Errorf("%s does not depend on %s", names[n], names[n+1])
		}
	}
	return nil
}

func problemList(ps []FieldProblem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n   %s: %s", p.Field, p.Detail)
	}
	return b.String()
}

// counter is a newID: "new-1", "new-2", ...
func counter() func() string {
	n := 0
	return func() string {
		n++
		return "new-" + strconv.Itoa(n)
	}
}

// rebuild copies inv's maps, inserting in reverse key order.
func rebuild(inv OrderInventory) OrderInventory {
	out := OrderInventory{Entities: map[string]Entity{}, EntityVersions: map[VersionKey]Entity{},
		Instances: map[InstanceKey]Instance{}, Live: map[InstanceKey]bool{}}
	for _, k := range slices.Backward(slices.Sorted(mapKeys(inv.Entities))) {
		out.Entities[k] = inv.Entities[k]
	}
	for k, v := range inv.EntityVersions {
		out.EntityVersions[k] = v
	}
	keys := make([]InstanceKey, 0, len(inv.Instances))
	for k := range inv.Instances {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b InstanceKey) int { return -strings.Compare(a.Entity+"\x00"+a.Ref, b.Entity+"\x00"+b.Ref) })
	for _, k := range keys {
		out.Instances[k] = inv.Instances[k]
	}
	for k, v := range inv.Live {
		out.Live[k] = v
	}
	return out
}

// orderGen generates inventories and orders over small vocabularies, so
// that names, ids and identities collide often.
type orderGen struct {
	r *rand.Rand
	// clean: an order whose faults are rare (most of them then pass).
	clean bool
	// live are the references to live instances, by entity, and
	// usable the instances an update or delete may name.
	live, usable map[string][]string
}

func (g *orderGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *orderGen) chance(p float64) bool    { return g.r.Float64() < p }

// fault is chance(p), much rarer for a clean order.
func (g *orderGen) fault(p float64) bool {
	if g.clean {
		p /= 20
	}
	return g.chance(p)
}

var (
	genEntities  = []string{"vm", "site"}
	genAttrNames = []string{"name", "size", "note", "site", "peers"}
	genValues    = []string{"x", "y", "alpha", "beta"}
)

func genID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func (g *orderGen) specs(entity string) []AttributeSpec {
	var out []AttributeSpec
	for _, n := range genAttrNames {
		if !g.chance(0.8) {
			continue
		}
		s := AttributeSpec{Name: n, Modifier: Modifier(g.pick("r", "rw", "rw+", "rw+")), Required: g.chance(0.3)}
		if g.chance(0.25) {
			s.Default = json.RawMessage(strconv.Quote(g.pick(genValues...)))
		}
		switch n {
		case "site":
			s.References = "site"
		case "peers":
			s.References = "vm"
		}
		out = append(out, s)
	}
	return out
}

func (g *orderGen) inventory() OrderInventory {
	inv := OrderInventory{Entities: map[string]Entity{}, EntityVersions: map[VersionKey]Entity{},
		Instances: map[InstanceKey]Instance{}, Live: map[InstanceKey]bool{}}
	g.live, g.usable = map[string][]string{}, map[string][]string{}
	for _, name := range genEntities {
		if g.fault(0.1) {
			continue
		}
		e := Entity{Name: name, Attributes: g.specs(name), Version: g.r.IntN(3), Lifecycle: g.lifecycle()}
		if g.chance(0.7) {
			e.Identity = "name"
			if !slices.ContainsFunc(e.Attributes, func(s AttributeSpec) bool { return s.Name == "name" }) {
				e.Attributes = append(e.Attributes, AttributeSpec{Name: "name", Modifier: ReadWrite})
			}
		}
		inv.Entities[name] = e
		if EntityVersion(e.Version) > 1 && g.chance(0.9) {
			inv.EntityVersions[VersionKey{name, 1}] = Entity{Name: name, Identity: e.Identity, Attributes: g.specs(name), Version: 1}
		}
	}
	for n := range 1 + g.r.IntN(6) {
		ent := g.pick(genEntities...)
		inst := Instance{ID: genID(n), Entity: ent, State: g.pick("up", "creating", "terminated"), Version: 1}
		inst.Deleted = inst.State == "terminated" && g.chance(0.7)
		set := map[string]any{}
		for _, a := range genAttrNames {
			if g.chance(0.5) {
				set[a] = g.value(a)
			}
		}
		if g.chance(0.7) {
			inst.Identity = g.pick(genValues...)
			set["name"] = inst.Identity
		}
		version := g.r.IntN(3)
		if g.chance(0.5) {
			inst.Candidate, inst.CandidateVersion = set, version
		} else {
			inst.Active, inst.ActiveVersion = set, version
		}
		inv.Instances[InstanceKey{ent, inst.ID}] = inst
		live := !inst.Deleted && g.chance(0.9) // else: a state that purges
		if live {
			inv.Live[InstanceKey{ent, inst.ID}] = true
			g.live[ent] = append(g.live[ent], inst.ID)
		}
		if !inst.Deleted {
			g.usable[ent] = append(g.usable[ent], inst.ID)
		}
		if inst.Identity != "" && !inst.Deleted {
			inv.Instances[InstanceKey{ent, inst.Identity}] = inst
			g.usable[ent] = append(g.usable[ent], inst.Identity)
			if live {
				inv.Live[InstanceKey{ent, inst.Identity}] = true
				g.live[ent] = append(g.live[ent], inst.Identity)
			}
		}
	}
	return inv
}

// genStates are the states a create may name: the generated lifecycles'
// (start, up, creating) and one none has.
var genStates = []string{"start", "up", "creating", "nowhere"}

// lifecycle is a lifecycle whose start state is "start", with a few of
// genStates as initial_states (maybe the start state again).
func (g *orderGen) lifecycle() Lifecycle {
	l := Lifecycle{Name: "gen", Start: "start"}
	for _, st := range genStates[:3] {
		if g.chance(0.3) {
			l.InitialStates = append(l.InitialStates, st)
		}
	}
	return l
}

// initialState is an item's initial_state: mostly none or one the
// lifecycle allows for a create, now and then another (a fault), and
// for an update or a delete mostly none.
func (g *orderGen) initialState(inv OrderInventory, it OrderItemRequest) string {
	if it.Operation != "create" {
		if g.fault(0.1) {
			return g.pick(genStates...)
		}
		return ""
	}
	if g.fault(0.15) {
		return g.pick(genStates...)
	}
	if e, ok := inv.Entities[it.ServiceEntity]; ok && g.chance(0.5) {
		return g.pick(e.Lifecycle.Initial()...)
	}
	return ""
}

// value is a value of attribute a: a string, for peers a list of
// strings (references by id or identity, or to nothing).
func (g *orderGen) value(a string) any {
	ref := func() string {
		target := map[string]string{"site": "site", "peers": "vm"}[a]
		if live := g.live[target]; len(live) > 0 && !g.fault(0.5) {
			return g.pick(live...)
		}
		if g.chance(0.4) {
			return genID(g.r.IntN(7))
		}
		return g.pick(append(genValues, "nowhere")...)
	}
	switch a {
	case "peers":
		l := []any{}
		for range g.r.IntN(3) {
			l = append(l, ref())
		}
		return l
	case "site":
		return ref()
	}
	return g.pick(genValues...)
}

func (g *orderGen) attributes() map[string]any {
	if g.chance(0.15) {
		return nil
	}
	out := map[string]any{}
	for _, a := range append(genAttrNames, "unknown") {
		if g.chance(0.35) {
			out[a] = g.value(a)
		}
	}
	return out
}

func (g *orderGen) edits() []Edit {
	if g.chance(0.1) {
		return []Edit{}
	}
	var out []Edit
	for range 1 + g.r.IntN(2) {
		e := Edit{Operation: "replace", Target: g.pick(genAttrNames...)}
		switch g.r.IntN(10) {
		case 0:
			e.Operation = "remove"
		case 1:
			e.Operation = "bogus"
		case 2:
			e.Target = "["
		case 3:
			e.Operation = "merge"
			e.Value = json.RawMessage(`{"k":"v"}`)
		}
		if e.Operation == "replace" {
			v, _ := json.Marshal(g.value(e.Target))
			e.Value = v
		}
		out = append(out, e)
	}
	return out
}

func (g *orderGen) request(inv OrderInventory) OrderRequest {
	req := OrderRequest{Policy: "all_or_nothing"}
	if g.chance(0.5) {
		req.Policy = "best_effort"
	}
	if g.fault(0.05) {
		req.Policy = g.pick("", "sometimes")
	}
	n := 1 + g.r.IntN(5)
	if g.fault(0.02) {
		n = 0
	}
	refs := slices.SortedFunc(func(yield func(InstanceKey) bool) {
		for k := range inv.Instances {
			if !yield(k) {
				return
			}
		}
	}, func(a, b InstanceKey) int { return strings.Compare(a.Entity+a.Ref, b.Entity+b.Ref) })
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range n {
		it := OrderItemRequest{ID: ids[i]}
		if g.fault(0.1) {
			it.ID = g.pick("", "-bad id", ids[g.r.IntN(n)]) // the last a duplicate, maybe
		}
		it.Operation = g.pick("create", "create", "update", "update", "delete")
		if g.fault(0.05) {
			it.Operation = g.pick("", "migrate")
		}
		it.ServiceEntity = g.pick(genEntities...)
		if g.fault(0.05) {
			it.ServiceEntity = g.pick("", "ghost")
		}
		if usable := g.usable[it.ServiceEntity]; it.Operation != "create" && len(usable) > 0 && !g.fault(0.5) {
			it.Instance = g.pick(usable...)
		} else if k := g.r.IntN(len(refs) + 1); k < len(refs) && refs[k].Entity == it.ServiceEntity && (it.Operation != "create" || g.fault(0.1)) {
			it.Instance = refs[k].Ref
		} else if it.Operation != "create" {
			it.Instance = g.pick("", genID(99), "nothing", genID(g.r.IntN(6)))
		}
		switch {
		case it.Operation == "delete":
			if g.fault(0.1) {
				it.Attributes = g.attributes()
			}
		case it.Operation == "create" || g.chance(0.5):
			it.Attributes = g.attributes()
			if g.fault(0.1) {
				it.Edit = g.edits()
			}
		default:
			it.Edit = g.edits()
			if g.fault(0.1) {
				it.Attributes = g.attributes()
			}
		}
		if it.Operation == "update" && it.Attributes != nil && !g.fault(0.5) {
			// Updates mostly change rw+ attributes.
			if e, ok := inv.Entities[it.ServiceEntity]; ok {
				for a := range it.Attributes {
					if s, ok := modelSpec(e.Attributes, a); !ok || s.Modifier != ReadWriteAlways {
						delete(it.Attributes, a)
					}
				}
			}
		}
		if it.Operation == "create" && it.Attributes != nil && !g.fault(0.3) {
			// Creates mostly keep to the entity's writable attributes.
			if e, ok := inv.Entities[it.ServiceEntity]; ok {
				for a := range it.Attributes {
					if s, ok := modelSpec(e.Attributes, a); !ok || s.Modifier == ReadOnly {
						delete(it.Attributes, a)
					}
				}
				for _, s := range e.Attributes {
					if s.Required && s.Modifier != ReadOnly {
						it.Attributes[s.Name] = g.value(s.Name)
					}
				}
			}
		}
		it.InitialState = g.initialState(inv, it)
		for range g.r.IntN(3) {
			switch {
			case g.fault(0.15):
				it.DependsOn = append(it.DependsOn, g.pick("zz", it.ID))
			case g.fault(0.5):
				it.DependsOn = append(it.DependsOn, ids[g.r.IntN(n)])
			case i == 0:
			default:
				it.DependsOn = append(it.DependsOn, ids[g.r.IntN(i)]) // an earlier item: no cycle
			}
		}
		req.Items = append(req.Items, it)
	}
	return req
}

// TestCheckOrderCycle: the cycle reported is the one from the lowest
// item, at the depends_on naming its next item.
func TestCheckOrderCycle(t *testing.T) {
	t.Parallel()
	inv := OrderInventory{Entities: map[string]Entity{"vm": {Name: "vm"}}}
	req := OrderRequest{Policy: OrderBestEffort, Items: []OrderItemRequest{
		{ID: "a", Operation: OpCreate, ServiceEntity: "vm"},
		{ID: "b", Operation: OpCreate, ServiceEntity: "vm", DependsOn: []string{"a", "c"}},
		{ID: "c", Operation: OpCreate, ServiceEntity: "vm", DependsOn: []string{"b"}},
	}}
	_, problems := CheckOrder(req, inv, counter())
	want := []FieldProblem{{"/items/1/depends_on/1", "a dependency cycle: b → c → b"}}
	if !slices.Equal(problems, want) {
		t.Errorf("problems %v, want %v", problems, want)
	}
}

// FuzzCheckOrder decodes orders as the API does and checks them against
// a fixed inventory: CheckOrder never panics, returns items or
// problems, the same twice, and agrees with orderModel.
func FuzzCheckOrder(f *testing.F) {
	f.Add([]byte(`{"policy":"all_or_nothing","items":[{"id":"a","operation":"create","service_entity":"vm","attributes":{"name":"x"}}]}`))
	f.Add([]byte(`{"policy":"best_effort","items":[{"id":"a","operation":"update","service_entity":"vm","instance":"x","edit":[{"operation":"replace","target":"size","value":"2"}],"depends_on":["a"]}]}`))
	f.Add([]byte(`{"policy":"best_effort","items":[{"id":"a","operation":"delete","service_entity":"site","instance":"` + genID(1) + `","depends_on":["b"]},{"id":"b","operation":"create","service_entity":"vm","attributes":{"site":"` + genID(1) + `"},"depends_on":["a"]}]}`))
	f.Add([]byte(`{"policy":"best_effort","items":[{"id":"a","operation":"create","service_entity":"vm","initial_state":"up"},{"id":"b","operation":"delete","service_entity":"vm","instance":"x","initial_state":"start"}]}`))
	g := &orderGen{r: rand.New(rand.NewPCG(1, 2))}
	inv := g.inventory()
	f.Fuzz(func(t *testing.T, body []byte) {
		var req OrderRequest
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if dec.Decode(&req) != nil {
			return
		}
		items, problems := CheckOrder(req, inv, counter())
		if (items == nil) == (problems == nil) {
			t.Fatalf("items %v, problems %v", items, problems)
		}
		items2, problems2 := CheckOrder(req, inv, counter())
		if !reflect.DeepEqual(items, items2) || !reflect.DeepEqual(problems, problems2) {
			t.Fatal("not deterministic")
		}
		for _, it := range req.Items {
			if !modelSafe(it) {
				return
			}
		}
		checkOrderCase(t, req, inv)
	})
}

// modelSafe reports whether orderModel covers an item: its identity and
// attribute values as the generator makes them (strings, lists of
// strings); numbers and dicts compare by JSON value, which the model
// leaves to CheckUpdate's tests.
func modelSafe(it OrderItemRequest) bool {
	for _, v := range it.Attributes {
		switch v := v.(type) {
		case string:
		case []any:
			for _, e := range v {
				if _, ok := e.(string); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return len(it.Edit) == 0
}

// BenchmarkCheckOrder: an order of MaxOrderItems creates and updates,
// checked once and looked up as the API does (OrderLookups until done).
func BenchmarkCheckOrder(b *testing.B) {
	specs := []AttributeSpec{{Name: "name", Modifier: ReadWrite, Required: true}, {Name: "size", Modifier: ReadWriteAlways},
		{Name: "site", Modifier: ReadWrite, References: "site"}}
	inv := OrderInventory{Entities: map[string]Entity{"vm": {Name: "vm", Identity: "name", Attributes: specs}},
		Instances: map[InstanceKey]Instance{}, Live: map[InstanceKey]bool{{"site", "s"}: true}}
	req := OrderRequest{Policy: OrderBestEffort}
	for i := range MaxOrderItems {
		it := OrderItemRequest{ID: strconv.Itoa(i), Operation: OpCreate, ServiceEntity: "vm",
			Attributes: map[string]any{"name": "vm" + strconv.Itoa(i), "site": "s"}}
		if i%2 == 1 {
			id := genID(i)
			inv.Instances[InstanceKey{"vm", id}] = Instance{ID: id, Entity: "vm", Sets: Sets{Active: map[string]any{"name": id, "size": "1"}}}
			it = OrderItemRequest{ID: strconv.Itoa(i), Operation: OpUpdate, ServiceEntity: "vm", Instance: id,
				Attributes: map[string]any{"size": "2"}, DependsOn: []string{strconv.Itoa(i - 1)}}
		}
		req.Items = append(req.Items, it)
	}
	b.Run("check", func(b *testing.B) {
		for b.Loop() {
			if items, problems := CheckOrder(req, inv, counter()); items == nil {
				b.Fatal(problems[:1])
			}
		}
	})
	b.Run("gather", func(b *testing.B) {
		for b.Loop() {
			gather(req, inv)
		}
	})
}
