package lsm

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestSimpleChecks(t *testing.T) {
	t.Parallel()
	l := Simple()
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestSimpleIsTheDocs reads the two tables of docs/lsm.md that define
// the lifecycle simple and requires Simple to be exactly that: states
// with their model state, export, purge and terminal; transfers, in the
// table's order, with trigger, validate, target, error state and target
// operations. Descriptions are the code's own.
func TestSimpleIsTheDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/lsm.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, after, ok := strings.Cut(doc, "## The built-in lifecycle `simple`")
	if !ok {
		t.Fatal("docs/lsm.md has no section on the lifecycle simple")
	}
	want := Lifecycle{Name: "simple", Start: "start", States: map[string]State{}}
	row := regexp.MustCompile(`(?m)^\|(.*)\|\s*$`)
	name := regexp.MustCompile("^`([a-z_]+)`$")
	target := regexp.MustCompile("^`([a-z_]+)`(?: \\(`([a-z_]+)`\\))?$") // `to` (`error`)
	for _, m := range row.FindAllStringSubmatch(after, -1) {
		cells := strings.Split(m[1], "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) != 4 || !name.MatchString(cells[0]) {
			continue // a header, a separator
		}
		from := name.FindStringSubmatch(cells[0])[1]
		if tm := target.FindStringSubmatch(cells[2]); tm != nil {
			// from | trigger | to (on error) | operations
			var ops []Operation
			if op, _, _ := strings.Cut(cells[3], "("); strings.TrimSpace(op) != "" {
				ops = []Operation{Operation(strings.TrimSpace(op))}
			}
			triggers := strings.Split(cells[1], ", ")
			validate := slices.Contains(triggers, "validate")
			for _, trig := range triggers {
				if trig == "validate" {
					continue
				}
				want.Transfers = append(want.Transfers, Transfer{Source: from, Target: tm[1], Error: tm[2],
					Trigger: Trigger(trig), Validate: validate, TargetOperation: ops})
			}
			continue
		}
		// state | model state | resources | description
		want.States[from] = State{Name: from, ModelState: ModelState(cells[1]),
			Export: strings.Contains(cells[2], "exported"), Purge: cells[2] == "purged",
			Terminal: strings.HasPrefix(cells[3], "terminal")}
	}
	got := Simple()
	for k, s := range got.States {
		s.Description = ""
		got.States[k] = s
	}
	for i := range got.Transfers {
		got.Transfers[i].Description = ""
	}
	if len(want.States) < 10 || len(want.Transfers) < 10 {
		t.Fatalf("read %d states and %d transfers from docs/lsm.md: the tables changed shape", len(want.States), len(want.Transfers))
	}
	if !reflect.DeepEqual(got.States, want.States) {
		for _, k := range want.stateNames() {
			if got.States[k] != want.States[k] {
				t.Errorf("state %s: code %+v, docs %+v", k, got.States[k], want.States[k])
			}
		}
		t.Errorf("states: code has %v, docs %v", got.stateNames(), want.stateNames())
	}
	if !reflect.DeepEqual(got.Transfers, want.Transfers) {
		for i := range max(len(got.Transfers), len(want.Transfers)) {
			var g, w Transfer
			if i < len(got.Transfers) {
				g = got.Transfers[i]
			}
			if i < len(want.Transfers) {
				w = want.Transfers[i]
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("transfer %d: code %+v, docs %+v", i, g, w)
			}
		}
	}
}

func TestSimpleJSONRoundTrip(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Simple())
	if err != nil {
		t.Fatal(err)
	}
	var back Lifecycle
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, Simple()) {
		t.Errorf("JSON round trip changed the lifecycle:\n%s", b)
	}
	if !strings.Contains(string(b), `"model_state":"candidate"`) || !strings.Contains(string(b), `"target_operation":["promote"]`) {
		t.Errorf("field names are not the catalog's: %s", b)
	}
}

// transferFrom returns the index of the transfer of l with that source
// and trigger.
func transferFrom(t *testing.T, l *Lifecycle, source string, trigger Trigger) int {
	t.Helper()
	for i, tr := range l.Transfers {
		if tr.Source == source && tr.Trigger == trigger {
			return i
		}
	}
	t.Fatalf("no %s transfer from %s", trigger, source)
	return -1
}

// tiny is a small valid lifecycle to break: a validated create, a
// deploy, a delete.
func tiny() Lifecycle {
	return Lifecycle{
		Name:  "tiny",
		Start: "new",
		States: map[string]State{
			"new":  {Name: "new", ModelState: Candidate},
			"bad":  {Name: "bad", ModelState: Inactive},
			"up":   {Name: "up", ModelState: Active, Export: true},
			"gone": {Name: "gone", ModelState: Inactive, Terminal: true},
		},
		Transfers: []Transfer{
			{Source: "new", Target: "up", Error: "bad", Trigger: Auto, Validate: true, TargetOperation: []Operation{Promote}},
			{Source: "bad", Target: "gone", Trigger: OnDelete},
			{Source: "up", Target: "gone", Trigger: OnDelete},
		},
	}
}

func TestCheckRules(t *testing.T) {
	t.Parallel()
	type problem struct {
		rule     Rule
		state    string
		transfer int // -2: any
	}
	any := -2
	cases := []struct {
		why    string
		base   func() Lifecycle
		break_ func(t *testing.T, l *Lifecycle)
		want   []problem // exactly these, in any order
	}{
		{"tiny is valid", tiny, func(*testing.T, *Lifecycle) {}, nil},
		{"a second api transfer to another target is fine", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "failed", Target: "deleting", Trigger: API})
		}, nil},
		{"an auto cycle through a validation is fine", tiny, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "up", Target: "new", Trigger: Auto})
		}, nil},
		{"no name", Simple, func(t *testing.T, l *Lifecycle) { l.Name = "" },
			[]problem{{RuleName, "", -1}}},
		{"a state keyed by another name", Simple, func(t *testing.T, l *Lifecycle) {
			s := l.States["up"]
			s.Name = "UP"
			l.States["up"] = s
		}, []problem{{RuleStateName, "up", -1}}},
		{"a state with an empty name", tiny, func(t *testing.T, l *Lifecycle) {
			l.States[""] = State{ModelState: Inactive, Terminal: true}
		}, []problem{{RuleStateName, "", -1}, {RuleUnreachable, "", -1}}},
		{"a model state that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			s := l.States["up"]
			s.ModelState = "production"
			l.States["up"] = s
		}, []problem{{RuleModelState, "up", -1}}},
		{"export and purge", Simple, func(t *testing.T, l *Lifecycle) {
			s := l.States["deleting"]
			s.Export = true
			l.States["deleting"] = s
		}, []problem{{RuleStateExport, "deleting", -1}}},
		{"a terminal state purges", Simple, func(t *testing.T, l *Lifecycle) {
			s := l.States["terminated"]
			s.ModelState, s.Purge = Active, true
			l.States["terminated"] = s
		}, []problem{{RuleStateExport, "terminated", -1}}},
		{"an inactive state exports", Simple, func(t *testing.T, l *Lifecycle) {
			s := l.States["rejected"]
			s.Export = true
			l.States["rejected"] = s
		}, []problem{{RuleStateExport, "rejected", -1}}},
		{"no start", Simple, func(t *testing.T, l *Lifecycle) { l.Start = "" },
			[]problem{{RuleStart, "", -1}}},
		{"start names nothing", Simple, func(t *testing.T, l *Lifecycle) { l.Start = "begin" },
			[]problem{{RuleStart, "", -1}}},
		{"start is terminal", tiny, func(t *testing.T, l *Lifecycle) { l.Start = "gone" },
			[]problem{{RuleStart, "gone", -1}, {RuleUnreachable, "bad", -1}, {RuleUnreachable, "new", -1}, {RuleUnreachable, "up", -1}}},
		{"a target that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "update_rejected", Auto)].Target = "upp"
		}, []problem{{RuleUnknownState, "", transferFrom(t, ptr(Simple()), "update_rejected", Auto)}}},
		{"a source and an error state that do not exist", tiny, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "nowhere", Target: "up", Error: "void", Trigger: Resource})
		}, []problem{{RuleUnknownState, "", 3}, {RuleUnknownState, "", 3}}},
		{"a trigger that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "failed", API)].Trigger = "poke"
		}, []problem{{RuleTrigger, "", any}}},
		{"an operation that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "acknowledged", Auto)].TargetOperation = []Operation{"promote", "demote"}
		}, []problem{{RuleOperation, "", any}}},
		{"an error operation that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "creating", Resource)].ErrorOperation = []Operation{"clear everything"}
		}, []problem{{RuleOperation, "", any}}},
		{"an on_update transfer validates", Simple, func(t *testing.T, l *Lifecycle) {
			tr := &l.Transfers[transferFrom(t, l, "up", OnUpdate)]
			tr.Validate, tr.Error = true, "update_rejected"
		}, []problem{{RuleValidate, "", any}}},
		{"a validation without an error state", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "start", Auto)].Error = ""
		}, []problem{{RuleValidate, "", 0}, {RuleUnreachable, "rejected", -1}}},
		{"a resource transfer without an error state", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "deleting", Resource)].Error = ""
		}, []problem{{RuleResource, "", any}, {RuleUnreachable, "delete_failed", -1}}},
		{"a resource transfer from a state that deploys nothing", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "acknowledged", Target: "up", Error: "failed", Trigger: Resource})
		}, []problem{{RuleResource, "", len(Simple().Transfers)}}},
		{"an error state on a transfer that cannot fail", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "up", OnDelete)].Error = "delete_failed"
		}, []problem{{RuleErrorUnused, "", any}}},
		{"an error operation without an error state", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "rejected", OnUpdate)].ErrorOperation = []Operation{ClearCandidate}
		}, []problem{{RuleErrorUnused, "", any}}},
		{"two on_delete transfers from one state", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "up", Target: "terminated", Trigger: OnDelete})
		}, []problem{{RuleDuplicate, "", len(Simple().Transfers)}}},
		{"two auto transfers from one state", tiny, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "new", Target: "up", Error: "bad", Trigger: Auto, Validate: true})
		}, []problem{{RuleDuplicate, "", 3}}},
		{"two api transfers to one target", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "failed", Target: "creating", Trigger: API})
		}, []problem{{RuleDuplicate, "", len(Simple().Transfers)}}},
		{"a transfer out of a terminal state", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "terminated", Target: "start", Trigger: API})
		}, []problem{{RuleTerminalOut, "", len(Simple().Transfers)}}},
		{"a state with no way out", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = slices.DeleteFunc(l.Transfers, func(tr Transfer) bool { return tr.Source == "failed" })
		}, []problem{{RuleNoWayOut, "failed", -1}}},
		{"an unreachable state", Simple, func(t *testing.T, l *Lifecycle) {
			l.States["limbo"] = State{Name: "limbo", ModelState: Inactive}
			l.Transfers = append(l.Transfers, Transfer{Source: "limbo", Target: "terminated", Trigger: OnDelete})
		}, []problem{{RuleUnreachable, "limbo", -1}}},
		{"an auto loop", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "up", Target: "update_rejected", Trigger: Auto})
		}, []problem{{RuleAutoLoop, "up", -1}}},
		{"an auto transfer to its own source", tiny, func(t *testing.T, l *Lifecycle) {
			l.Transfers = append(l.Transfers, Transfer{Source: "bad", Target: "bad", Trigger: Auto})
		}, []problem{{RuleAutoLoop, "bad", -1}}},
		{"initial states that are designed, candidate or start are fine", Simple, func(t *testing.T, l *Lifecycle) {
			l.InitialStates = []string{"start", "acknowledged", "update_start"}
		}, nil},
		{"an initial state that does not exist", Simple, func(t *testing.T, l *Lifecycle) {
			l.InitialStates = []string{"draft"}
		}, []problem{{RuleInitial, "", -1}}},
		{"a terminal initial state", Simple, func(t *testing.T, l *Lifecycle) {
			l.InitialStates = []string{"terminated"}
		}, []problem{{RuleInitial, "terminated", -1}}},
		{"an active initial state", Simple, func(t *testing.T, l *Lifecycle) {
			l.InitialStates = []string{"up"}
		}, []problem{{RuleInitial, "up", -1}}},
		{"an initial state listed twice", Simple, func(t *testing.T, l *Lifecycle) {
			l.InitialStates = []string{"acknowledged", "acknowledged"}
		}, []problem{{RuleInitial, "acknowledged", -1}}},
		{"a state reachable from an initial state only", Simple, func(t *testing.T, l *Lifecycle) {
			l.States["draft"] = State{Name: "draft", ModelState: Inactive}
			l.Transfers = append(l.Transfers, Transfer{Source: "draft", Target: "start", Trigger: API},
				Transfer{Source: "draft", Target: "terminated", Trigger: OnDelete})
			l.InitialStates = []string{"draft"}
		}, nil},
		{"a config name on an auto transfer is fine", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "acknowledged", Auto)].ConfigName = "auto_creating"
		}, nil},
		{"a config name on an api transfer", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "failed", API)].ConfigName = "retry"
		}, []problem{{RuleConfigName, "", transferFrom(t, ptr(Simple()), "failed", API)}}},
		{"a config name on a resource transfer", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "creating", Resource)].ConfigName = "deployed"
		}, []problem{{RuleConfigName, "", transferFrom(t, ptr(Simple()), "creating", Resource)}}},
		{"a config name that is not a name", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "start", Auto)].ConfigName = "auto creating"
		}, []problem{{RuleConfigName, "", transferFrom(t, ptr(Simple()), "start", Auto)}}},
		{"a config name too long", Simple, func(t *testing.T, l *Lifecycle) {
			l.Transfers[transferFrom(t, l, "start", Auto)].ConfigName = "a" + strings.Repeat("b", 64)
		}, []problem{{RuleConfigName, "", transferFrom(t, ptr(Simple()), "start", Auto)}}},
	}
	for _, c := range cases {
		t.Run(c.why, func(t *testing.T) {
			t.Parallel()
			l := c.base()
			c.break_(t, &l)
			err := l.Check()
			var got []Problem
			if err != nil {
				var ce *CheckError
				if !errors.As(err, &ce) {
					t.Fatalf("Check returned %T, want *CheckError: %v", err, err)
				}
				got = ce.Problems
				if ce.Lifecycle != l.Name {
					t.Errorf("error names lifecycle %q, want %q", ce.Lifecycle, l.Name)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %d problems, want %d: %v", len(got), len(c.want), err)
			}
			left := slices.Clone(got)
			for _, w := range c.want {
				i := slices.IndexFunc(left, func(p Problem) bool {
					return p.Rule == w.rule && p.State == w.state && (w.transfer == any || p.Transfer == w.transfer)
				})
				if i < 0 {
					t.Errorf("no problem %+v in %v", w, err)
					continue
				}
				if left[i].Message == "" {
					t.Errorf("problem %+v has no message", left[i])
				}
				left = slices.Delete(left, i, i+1)
			}
			if err != nil && !strings.Contains(err.Error(), got[0].Message) {
				t.Errorf("the error does not list its problems: %v", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestCheckEverythingAtOnce breaks a lifecycle in several ways and wants
// every problem, in a stable order.
func TestCheckEverythingAtOnce(t *testing.T) {
	t.Parallel()
	l := Lifecycle{
		Name:  "broken",
		Start: "a",
		States: map[string]State{
			"a": {Name: "a", ModelState: Candidate},
			"b": {Name: "b", ModelState: "weird"},
			"c": {Name: "c", ModelState: Active},
			"z": {Name: "z", ModelState: Inactive, Terminal: true},
		},
		Transfers: []Transfer{
			{Source: "a", Target: "b", Trigger: Auto},
			{Source: "b", Target: "a", Trigger: Auto},
			{Source: "z", Target: "a", Trigger: "later"},
			{Source: "a", Target: "q", Trigger: Resource},
		},
	}
	err := l.Check()
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CheckError, got %v", err)
	}
	var rules []Rule
	for _, p := range ce.Problems {
		rules = append(rules, p.Rule)
	}
	want := []Rule{
		RuleModelState,               // b
		RuleTrigger, RuleTerminalOut, // transfers[2]
		RuleUnknownState,           // transfers[3]: target q
		RuleResource, RuleResource, // transfers[3]: no error state, a deploys nothing
		RuleNoWayOut,                     // c
		RuleUnreachable, RuleUnreachable, // c, z
		RuleAutoLoop, // a, b
	}
	if !slices.Equal(rules, want) {
		t.Errorf("rules %v, want %v\n%v", rules, want, err)
	}
	if err2 := l.Check(); err2.Error() != err.Error() {
		t.Errorf("two checks differ:\n%v\n%v", err, err2)
	}
	if !strings.Contains(err.Error(), "among the states a, b") {
		t.Errorf("the auto loop is not named: %v", err)
	}
}
