package lsm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestAutoConfigTakes: the precedence rule on hand-picked cases, each
// with its reason.
func TestAutoConfigTakes(t *testing.T) {
	t.Parallel()
	named := Transfer{Source: "a", Target: "b", Trigger: Auto, ConfigName: "n"}
	plain := Transfer{Source: "a", Target: "b", Trigger: Auto}
	cases := []struct {
		why  string
		c    AutoConfig
		t    Transfer
		want bool
	}{
		{"nothing set: taken", AutoConfig{}, named, true},
		{"an unnamed transfer with names off: taken", AutoConfig{Entity: map[string]bool{"n": false}}, plain, true},
		{"the entity turns the name off", AutoConfig{Entity: map[string]bool{"n": false}}, named, false},
		{"the entity turns another name off", AutoConfig{Entity: map[string]bool{"m": false}}, named, true},
		{"the instance turns it back on", AutoConfig{Entity: map[string]bool{"n": false}, Instance: map[string]bool{"n": true}}, named, true},
		{"the instance turns it off", AutoConfig{Entity: map[string]bool{"n": true}, Instance: map[string]bool{"n": false}}, named, false},
		{"the entity-wide switch beats the instance's name", AutoConfig{Off: true, Instance: map[string]bool{"n": true}}, named, false},
		{"the entity-wide switch holds unnamed transfers", AutoConfig{Off: true}, plain, false},
		{"the instance-wide switch holds them", AutoConfig{InstanceOff: true, Entity: map[string]bool{"n": true}}, named, false},
		{"an api transfer is never the engine's", AutoConfig{}, Transfer{Source: "a", Target: "b", Trigger: API}, false},
	}
	for _, c := range cases {
		if got := c.c.Takes(c.t); got != c.want {
			t.Errorf("%s: Takes = %v, want %v", c.why, got, c.want)
		}
	}
}

// TestAutoConfigProperties checks Takes on random configs against the
// rule stated as properties: the wide switches veto; an instance's name
// decides over the entity's; a name nobody sets is on; a change of one
// name's entry changes nothing for transfers of other names.
func TestAutoConfigProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(31, 2))
	names := []string{"", "a", "b", "c"}
	randMap := func() map[string]bool {
		if rng.IntN(4) == 0 {
			return nil
		}
		m := map[string]bool{}
		for _, n := range names[1:] {
			if rng.IntN(2) == 0 {
				m[n] = rng.IntN(2) == 0
			}
		}
		return m
	}
	for i := range 5000 {
		c := AutoConfig{Off: rng.IntN(4) == 0, InstanceOff: rng.IntN(4) == 0, Entity: randMap(), Instance: randMap()}
		tr := Transfer{Source: "s", Target: "t", Trigger: Auto, ConfigName: names[rng.IntN(len(names))]}
		got := c.Takes(tr)
		where := fmt.Sprintf("case %d: %+v, transfer name %q", i, c, tr.ConfigName)
		if (c.Off || c.InstanceOff) && got {
			t.Fatalf("%s: taken with a wide switch off", where)
		}
		wide := c
		wide.Off, wide.InstanceOff = false, false
		if c.Off || c.InstanceOff {
			// Turning the wide switches on gives the names their say, and
			// never makes a transfer the names hold taken.
			if wide.Takes(tr) && !(AutoConfig{Entity: c.Entity, Instance: c.Instance}).Takes(tr) {
				t.Fatalf("%s: the wide switches are not a plain veto", where)
			}
			continue
		}
		n := tr.ConfigName
		ion, iset := c.Instance[n]
		eon, eset := c.Entity[n]
		switch {
		case n == "":
			if !got {
				t.Fatalf("%s: an unnamed transfer held", where)
			}
		case iset:
			if got != ion {
				t.Fatalf("%s: the instance's entry %v does not decide", where, ion)
			}
			flipped := AutoConfig{Entity: map[string]bool{n: !eon}, Instance: c.Instance}
			if flipped.Takes(tr) != got {
				t.Fatalf("%s: the entity's entry matters under the instance's", where)
			}
		case eset:
			if got != eon {
				t.Fatalf("%s: the entity's entry %v does not decide", where, eon)
			}
		default:
			if !got {
				t.Fatalf("%s: a name nobody set is off", where)
			}
		}
		// Another name's entries change nothing.
		other := AutoConfig{Entity: map[string]bool{}, Instance: map[string]bool{}}
		for k, v := range c.Entity {
			other.Entity[k] = v
		}
		for k, v := range c.Instance {
			other.Instance[k] = v
		}
		for _, m := range names[1:] {
			if m != n {
				other.Entity[m], other.Instance[m] = rng.IntN(2) == 0, rng.IntN(2) == 0
			}
		}
		if other.Takes(tr) != got {
			t.Fatalf("%s: other names' entries changed the decision", where)
		}
	}
}

// TestAllowedWithHeldNames: a subject whose auto transfer a config name
// holds lists it as the set-state it takes, Decide takes a set-state to
// its target as that auto transfer, and one whose names let it go does
// neither.
func TestAllowedWithHeldNames(t *testing.T) {
	t.Parallel()
	l := Simple()
	l.Transfers[slicesIndexAuto(&l, "start")].ConfigName = "auto_validate"
	held := Subject{ID: "x", Version: 1, State: "start", Lifecycle: &l,
		Auto: AutoConfig{Entity: map[string]bool{"auto_validate": false}}}
	if evs := held.Allowed(); len(evs) == 0 || evs[0] != (Event{Trigger: API, Target: "acknowledged"}) {
		t.Errorf("held: allowed = %v", evs)
	}
	d, rej := Decide(held, Request{Op: OpSetState, CurrentVersion: 1, Target: "acknowledged"})
	if rej != nil || d.Transfer.Trigger != Auto || d.Transfer.Target != "acknowledged" {
		t.Errorf("held: set-state = %+v, %v", d, rej)
	}
	free := held
	free.Auto.Instance = map[string]bool{"auto_validate": true}
	if evs := free.Allowed(); len(evs) == 0 || evs[0].Trigger != Auto {
		t.Errorf("let go by the instance: allowed = %v", evs)
	}
	if _, rej := Decide(free, Request{Op: OpSetState, CurrentVersion: 1, Target: "acknowledged"}); rej == nil || rej.Reason != RejectIllegal {
		t.Errorf("let go: a set-state to the auto target = %v", rej)
	}
	// Another state's auto transfer has no name: the name holds only its own.
	other := held
	other.State = "acknowledged"
	if evs := other.Allowed(); len(evs) == 0 || evs[0].Trigger != Auto {
		t.Errorf("another state: allowed = %v", evs)
	}
}

func slicesIndexAuto(l *Lifecycle, source string) int {
	for i, t := range l.Transfers {
		if t.Source == source && t.Trigger == Auto {
			return i
		}
	}
	panic("no auto transfer from " + source)
}
