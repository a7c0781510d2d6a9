package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// run is a random run: its items, the undefined resources outside it, and
// the limits to plan it with.
type run struct {
	items   []Item
	outside map[string]bool
	limits  Limits
}

// randomRun makes a run of up to max items on a few agents. Requires point
// at other items (earlier ones only unless cycles), at resources outside
// the run, some of them undefined; a few items are undefined.
func randomRun(r *rand.Rand, max int, cycles bool) run {
	n := r.IntN(max + 1)
	agents := 1 + r.IntN(4)
	undefinedShare := r.IntN(4) // out of 40; none in a quarter of the runs
	// Ids in a random order, so that the id order is not the topological.
	perm := r.Perm(n)
	id := func(i int) string { return fmt.Sprintf("r%05d", perm[i]) }
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{ID: id(i), Agent: fmt.Sprintf("a%d", r.IntN(agents)), Size: 1 + r.IntN(300)}
		for d := r.IntN(4); d > 0 && i > 0; d-- {
			items[i].Requires = append(items[i].Requires, id(r.IntN(i)))
		}
		if cycles && i > 0 && r.IntN(20) == 0 {
			items[r.IntN(i)].Requires = append(items[r.IntN(i)].Requires, id(i))
		}
		if r.IntN(10) == 0 {
			items[i].Requires = append(items[i].Requires, fmt.Sprintf("x%d", r.IntN(5)))
		}
		if undefinedShare > 0 && r.IntN(40) < undefinedShare {
			items[i].Undefined = true
		}
	}
	outside := map[string]bool{}
	for k := range 5 {
		if r.IntN(3) == 0 {
			outside[fmt.Sprintf("x%d", k)] = true
		}
	}
	if r.IntN(10) == 0 && n > 0 {
		// outside may name a resource the run covers: its item decides.
		outside[items[r.IntN(n)].ID] = true
	}
	limits := Limits{MaxResources: 1 + r.IntN(60), MaxBytes: r.IntN(5000)}
	if r.IntN(10) == 0 {
		limits = Limits{}
	}
	if r.IntN(3) == 0 {
		// The agents share task queues: each agent is in a group (its
		// route), or none.
		groups := 1 + r.IntN(2)
		group := map[string]string{}
		for a := range agents {
			if g := r.IntN(groups + 1); g > 0 {
				group[fmt.Sprintf("a%d", a)] = fmt.Sprintf("q%d", g)
			}
		}
		for i := range items {
			items[i].Group = group[items[i].Agent]
		}
	}
	r.Shuffle(n, func(i, j int) { items[i], items[j] = items[j], items[i] })
	return run{items, outside, limits}
}

// wantHeld is which items must be held, computed by a fixed point rather
// than planning's walk: undefined ones, those requiring an undefined
// resource outside the run, and those requiring a held one.
func wantHeld(items []Item, outside map[string]bool) map[string]bool {
	in := map[string]bool{}
	for _, it := range items {
		in[it.ID] = true
	}
	held := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, it := range items {
			if held[it.ID] {
				continue
			}
			h := it.Undefined
			for _, q := range it.Requires {
				h = h || held[q] || (!in[q] && outside[q])
			}
			if h {
				held[it.ID], changed = true, true
			}
		}
	}
	return held
}

// checkPlan verifies the invariants Make promises.
func checkPlan(items []Item, outside map[string]bool, limits Limits, res Result) error {
	if limits.MaxResources <= 0 {
		limits = DefaultLimits
	}
	// Every item is planned exactly once or held exactly once.
	seen := make([]int, len(items))
	for _, i := range res.Order {
		seen[i]++
	}
	for _, h := range res.Held {
		seen[h.Index]++
	}
	for i, c := range seen {
		if c != 1 {
			return fmt.Errorf("%s is planned or held %d times", items[i].ID, c)
		}
	}

	// Held: exactly the undefined ones and what requires them, in id
	// order, each with its result and a reason naming what it waits for.
	want := wantHeld(items, outside)
	if len(res.Held) != len(want) {
		return fmt.Errorf("%d held, want %d", len(res.Held), len(want))
	}
	for k, h := range res.Held {
		it := items[h.Index]
		if !want[it.ID] {
			return fmt.Errorf("%s held but requires nothing undefined", it.ID)
		}
		if k > 0 && items[res.Held[k-1].Index].ID >= it.ID {
			return fmt.Errorf("held not in id order at %s", it.ID)
		}
		switch {
		case it.Undefined:
			if h.Result != ResultUndefined || !strings.Contains(h.Why, "not known yet") {
				return fmt.Errorf("undefined %s held as %s: %s", it.ID, h.Result, h.Why)
			}
		default:
			q, _, _ := strings.Cut(strings.TrimPrefix(h.Why, "requires "), ",")
			if h.Result != ResultSkippedForUndefined || !strings.HasPrefix(h.Why, "requires ") ||
				!contains(it.Requires, q) || !(want[q] || outside[q]) {
				return fmt.Errorf("%s held as %s: %q does not name a held or undefined requirement", it.ID, h.Result, h.Why)
			}
		}
	}

	// Batches: numbered from 1, levels in order, one agent each or the
	// agents of one group (Agents naming them, sorted), within the
	// limits, and covering Order.
	total := 0
	for _, b := range res.Batches {
		total += b.Count
	}
	if total != len(res.Order) {
		return fmt.Errorf("batches count %d resources, the order %d", total, len(res.Order))
	}
	batch := map[string]int{} // id -> index into Batches
	pos := map[string]int{}   // id -> position inside its batch
	at := 0
	for k, b := range res.Batches {
		if b.Seq != k+1 || b.Count == 0 || b.Count > limits.MaxResources {
			return fmt.Errorf("batch %d = %+v (limit %d)", k, b, limits.MaxResources)
		}
		if k > 0 && res.Batches[k-1].Level > b.Level {
			return fmt.Errorf("batch %d of level %d after level %d", b.Seq, b.Level, res.Batches[k-1].Level)
		}
		bytes := 0
		agents := map[string]bool{}
		first := items[res.Order[at]]
		for p, i := range res.Order[at : at+b.Count] {
			it := items[i]
			agents[it.Agent] = true
			if it.Agent != first.Agent && (it.Group == "" || it.Group != first.Group) {
				return fmt.Errorf("batch %d holds %s of agent %s (group %q) and %s of agent %s (group %q)",
					b.Seq, first.ID, first.Agent, first.Group, it.ID, it.Agent, it.Group)
			}
			if !contains(b.AgentsOf(), it.Agent) {
				return fmt.Errorf("batch %d of agents %v holds %s of agent %s", b.Seq, b.AgentsOf(), it.ID, it.Agent)
			}
			batch[it.ID], pos[it.ID] = k, p
			bytes += it.Size
		}
		if len(agents) != len(b.AgentsOf()) || (len(b.Agents) == 1) ||
			!slices.IsSorted(b.AgentsOf()) || b.Agent != b.AgentsOf()[0] {
			return fmt.Errorf("batch %d names agent %s and agents %v, holds %d agents", b.Seq, b.Agent, b.Agents, len(agents))
		}
		if limits.MaxBytes > 0 && b.Count > 1 && bytes > limits.MaxBytes {
			return fmt.Errorf("batch %d holds %d bytes, more than %d", b.Seq, bytes, limits.MaxBytes)
		}
		if items[res.Order[at]].ID != b.First {
			return fmt.Errorf("batch %d names %s first, holds %s", b.Seq, b.First, items[res.Order[at]].ID)
		}
		at += b.Count
	}

	// A resource runs after what it requires: later in the same batch, or
	// in a batch of a higher level. (Cycles excepted: checkOrder.)
	for _, i := range res.Order {
		it := items[i]
		for _, r := range it.Requires {
			bd, ok := batch[r]
			if !ok {
				continue // outside the run
			}
			bi := batch[it.ID]
			switch {
			case bd == bi && pos[r] < pos[it.ID]:
			case bd != bi && res.Batches[bd].Level < res.Batches[bi].Level:
			default:
				return fmt.Errorf("%s (batch %d, level %d) requires %s (batch %d, level %d) but may run before it",
					it.ID, res.Batches[bi].Seq, res.Batches[bi].Level, r, res.Batches[bd].Seq, res.Batches[bd].Level)
			}
		}
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// byID is a plan in ids rather than indices, to compare plans of the same
// items given in different orders.
type byID struct {
	Order   []string
	Batches []Batch
	Held    []string
}

func named(items []Item, res Result) byID {
	var b byID
	for _, i := range res.Order {
		b.Order = append(b.Order, items[i].ID)
	}
	b.Batches = res.Batches
	for _, h := range res.Held {
		// Not Why: of two requirements equally near an undefined
		// resource, it names the one that came first.
		b.Held = append(b.Held, items[h.Index].ID+" "+h.Result)
	}
	return b
}

func TestMakeProperties(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 1))
		x := randomRun(r, 400, false)
		res := Make(x.items, x.outside, x.limits)
		if err := checkPlan(x.items, x.outside, x.limits, res); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}

		// The same input plans the same; the plan does not depend on
		// the order the rows came in.
		if again := Make(x.items, x.outside, x.limits); !reflect.DeepEqual(res, again) {
			t.Fatalf("seed %d: two plans of one input differ", seed)
		}
		shuffled := append([]Item(nil), x.items...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if a, b := named(x.items, res), named(shuffled, Make(shuffled, x.outside, x.limits)); !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: the plan depends on the input order", seed)
		}
	}
}

// TestMakeCycles: a cycle cannot be exported, but should stored data hold
// one, its members are still planned once each, within the limits.
func TestMakeCycles(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		x := randomRun(r, 200, true)
		res := Make(x.items, x.outside, x.limits)
		seen := make([]int, len(x.items))
		for _, i := range res.Order {
			seen[i]++
		}
		for _, h := range res.Held {
			seen[h.Index]++
		}
		limit := x.limits.MaxResources
		if limit <= 0 {
			limit = DefaultLimits.MaxResources
		}
		for _, b := range res.Batches {
			if b.Count < 1 || b.Count > limit {
				t.Fatalf("seed %d: batch %+v outside 1..%d", seed, b, limit)
			}
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("seed %d: %s planned or held %d times", seed, x.items[i].ID, c)
			}
		}
	}
}

// TestCheckPlanFails makes sure the checker catches broken plans: a
// checker that passes everything would prove nothing.
func TestCheckPlanFails(t *testing.T) {
	t.Parallel()
	items := []Item{
		{ID: "a", Agent: "x", Size: 1}, {ID: "b", Agent: "y", Size: 1, Requires: []string{"a"}},
		{ID: "c", Agent: "x", Size: 1}, {ID: "u", Agent: "x", Undefined: true},
		{ID: "v", Agent: "y", Size: 1, Requires: []string{"a"}}, {ID: "d", Agent: "x", Size: 1},
		{ID: "w", Agent: "y", Requires: []string{"u"}},
	}
	// Batches: [a c] [d] (bytes) at level 0, [b v] at level 1; u and w
	// held.
	limits := Limits{MaxResources: 3, MaxBytes: 2}
	if err := checkPlan(items, nil, limits, Make(items, nil, limits)); err != nil {
		t.Fatalf("the checker refuses a good plan: %v", err)
	}
	breaks := []struct {
		why string
		do  func(r *Result)
	}{
		{"b in a's level", func(r *Result) {
			for k := range r.Batches {
				r.Batches[k].Level = 0
			}
		}},
		{"levels out of order", func(r *Result) { r.Batches[1].Level, r.Batches[2].Level = 1, 0 }},
		{"an item planned twice", func(r *Result) { r.Order[1] = r.Order[0] }},
		{"an undefined item planned", func(r *Result) {
			r.Order = append(r.Order, r.Held[0].Index)
			r.Batches[len(r.Batches)-1].Count++
			r.Held = nil
		}},
		{"a defined item held", func(r *Result) {
			r.Held = append(r.Held, Held{Index: r.Order[0], Result: ResultUndefined, Why: "not known yet"})
		}},
		{"an empty batch", func(r *Result) { r.Batches = append(r.Batches, Batch{Seq: 4, Agent: "y", Level: 1}) }},
		{"a batch over the byte limit", func(r *Result) {
			r.Batches[0].Count += r.Batches[1].Count
			r.Batches = append(r.Batches[:1], r.Batches[2:]...)
			r.Batches[1].Seq = 2
		}},
		{"a wrong first", func(r *Result) { r.Batches[0].First = "zzz" }},
		{"an undefined item held as skipped", func(r *Result) { r.Held[0].Result = ResultSkippedForUndefined }},
		{"a reason naming nothing held", func(r *Result) { r.Held[1].Why = "requires a, which is undefined" }},
	}
	for _, b := range breaks {
		r := Make(items, nil, limits)
		b.do(&r)
		err := checkPlan(items, nil, limits, r)
		if err == nil {
			t.Errorf("the checker passes a plan with %s: %+v", b.why, r)
		}
		t.Logf("%s: %v", b.why, err)
	}
	if err := checkPlan(items, nil, Limits{MaxResources: 1, MaxBytes: 2}, Make(items, nil, limits)); err == nil {
		t.Errorf("the checker passes batches of 2 with a limit of 1")
	}
}

func FuzzMake(f *testing.F) {
	for _, s := range []uint64{0, 1, 42} {
		f.Add(s, uint8(50))
	}
	f.Fuzz(func(t *testing.T, seed uint64, size uint8) {
		x := randomRun(rand.New(rand.NewPCG(seed, 3)), int(size), false)
		if err := checkPlan(x.items, x.outside, x.limits, Make(x.items, x.outside, x.limits)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOutside(t *testing.T) {
	t.Parallel()
	items := []Item{{ID: "a", Requires: []string{"x", "b"}}, {ID: "b", Requires: []string{"y", "x"}}, {ID: "c"}}
	if got := Outside(items); !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Errorf("Outside() = %q, want [x y]: each requirement not in the run, once, in order", got)
	}
}
