// Package lsm is the state machine of the lifecycle service manager: the
// lifecycles service instances follow, the choice of the transfer an
// event causes, the operations transfers apply to an instance's three
// attribute sets, and the attribute modifiers that decide what a client
// may set. It is pure: no I/O, no clock, no map iteration order in what
// it returns, so the instance workflow can call it.
//
// A lifecycle is data (the catalog stores it as JSON, a model declares it
// in CUE as lsm.#Lifecycle of intend.dev/std/lsm, with the same field
// names): states, each with a model state (how the compiler treats the
// instance) and whether its resources are exported or purged, and
// transfers between them, each fired by one trigger. docs/lsm.md defines
// the built-in lifecycle, Simple.
package lsm

import (
	"fmt"
	"slices"
	"strings"
)

// ModelState says how the compiler treats an instance in a state (seed
// 003): whether it is in the model at all and with which attribute set.
type ModelState string

// The model states.
const (
	// Inactive: never in the model.
	Inactive ModelState = "inactive"
	// Candidate: in validation compiles, with the candidate set.
	Candidate ModelState = "candidate"
	// Designed: accepted and queued to become active; in validation
	// compiles with the candidate set, not yet exported.
	Designed ModelState = "designed"
	// Active: in every compile, with the active set.
	Active ModelState = "active"
)

func (m ModelState) valid() bool {
	switch m {
	case Inactive, Candidate, Designed, Active:
		return true
	}
	return false
}

// Trigger is the kind of event that fires a transfer.
type Trigger string

// The triggers.
const (
	// Auto fires as soon as the instance arrives in the source state.
	Auto Trigger = "auto"
	// API fires on a set-state request naming the transfer's target.
	API Trigger = "api"
	// OnUpdate fires on a PATCH of the instance.
	OnUpdate Trigger = "on_update"
	// OnDelete fires on a DELETE of the instance.
	OnDelete Trigger = "on_delete"
	// Resource fires when the deploy of the instance's resources ends:
	// to the target when all of them are deployed, to the error state
	// when one failed.
	Resource Trigger = "resource"
)

// triggers in the order errors list them.
var triggers = []Trigger{Auto, API, OnUpdate, OnDelete, Resource}

func (t Trigger) valid() bool { return slices.Contains(triggers, t) }

// Operation changes an instance's attribute sets on a transfer; Apply
// defines each.
type Operation string

// The operations.
const (
	ClearCandidate Operation = "clear candidate"
	ClearActive    Operation = "clear active"
	ClearRollback  Operation = "clear rollback"
	// Promote: candidate → active, active → rollback, candidate cleared.
	Promote Operation = "promote"
	// Rollback: rollback → active, active → candidate, rollback cleared.
	Rollback Operation = "rollback"
)

func (o Operation) valid() bool {
	switch o {
	case ClearCandidate, ClearActive, ClearRollback, Promote, Rollback:
		return true
	}
	return false
}

// Lifecycle is a state machine service instances follow. States are keyed
// by their name.
type Lifecycle struct {
	Name      string           `json:"name"`
	Start     string           `json:"start"`
	States    map[string]State `json:"states"`
	Transfers []Transfer       `json:"transfers"`
	// InitialStates are the states other than Start a create may name
	// as the instance's first state (docs/lsm.md, "Initial states");
	// Start is always allowed and is the default.
	InitialStates []string `json:"initial_states,omitempty"`
}

// Initial returns the states a create may begin in: Start, then
// InitialStates in their order, each once.
func (l *Lifecycle) Initial() []string {
	out := []string{l.Start}
	for _, s := range l.InitialStates {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// State is one state of a lifecycle.
type State struct {
	Name       string     `json:"name"`
	ModelState ModelState `json:"model_state"`
	// Export: the instance's resources, built from its active set, are
	// exported (deployed) while it is in this state.
	Export bool `json:"export"`
	// Purge: its resources are exported purged (removed).
	Purge bool `json:"purge"`
	// Terminal: the instance is gone; no transfer leaves the state and its
	// resource set is removed.
	Terminal    bool   `json:"terminal"`
	Description string `json:"description,omitempty"`
}

// Transfer is an edge of a lifecycle: in state Source, the event Trigger
// moves the instance to Target, or to Error when the transfer can fail (a
// validation or a deploy) and did.
type Transfer struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Error is the state a failed validation or deploy leads to; only a
	// transfer that validates or is resource-triggered has one.
	Error   string  `json:"error,omitempty"`
	Trigger Trigger `json:"trigger"`
	// Validate: compile the model with the instance's candidate set first
	// (only auto and api transfers).
	Validate bool `json:"validate"`
	// TargetOperation is applied, in order, when the transfer goes to
	// Target; ErrorOperation when it goes to Error.
	TargetOperation []Operation `json:"target_operation,omitempty"`
	ErrorOperation  []Operation `json:"error_operation,omitempty"`
	Description     string      `json:"description,omitempty"`
	// ConfigName, on an auto transfer, names the switch that turns it
	// off and on in the entity's and the instance's configs (Inmanta's
	// config_name; AutoConfig.Takes).
	ConfigName string `json:"config_name,omitempty"`
}

// canFail reports whether the transfer can end in its error state.
func (t Transfer) canFail() bool { return t.Validate || t.Trigger == Resource }

// Rule names a rule of Check, for callers that decide on it.
type Rule string

// The rules of Check.
const (
	RuleName         Rule = "name"          // the lifecycle has a name
	RuleStateName    Rule = "state_name"    // a state is keyed by its own, non-empty name
	RuleModelState   Rule = "model_state"   // a state's model state is one of the four
	RuleStateExport  Rule = "state_export"  // export and purge are exclusive, and not for inactive or terminal states
	RuleStart        Rule = "start"         // the start state exists and is not terminal
	RuleInitial      Rule = "initial"       // an initial state exists, is not terminal nor active, and is listed once
	RuleUnknownState Rule = "unknown_state" // a transfer names states that exist
	RuleTrigger      Rule = "trigger"       // a transfer's trigger is one of the five
	RuleOperation    Rule = "operation"     // operations are the five
	RuleValidate     Rule = "validate"      // only auto and api transfers validate, and they have an error state
	RuleResource     Rule = "resource"      // a resource transfer has an error state and leaves a state that exports or purges
	RuleErrorUnused  Rule = "error_unused"  // an error state or error operation only on a transfer that can fail
	RuleDuplicate    Rule = "duplicate"     // one transfer per (source, trigger), per (source, target) for api
	RuleTerminalOut  Rule = "terminal_out"  // no transfer leaves a terminal state
	RuleNoWayOut     Rule = "no_way_out"    // a transfer leaves every non-terminal state
	RuleUnreachable  Rule = "unreachable"   // every state is reachable from start
	RuleAutoLoop     Rule = "auto_loop"     // no cycle of auto transfers without a validation
	RuleConfigName   Rule = "config_name"   // a config name only on an auto transfer, and a valid name
)

// noTransfer is Problem.Transfer when no transfer is at fault.
const noTransfer = -1

// Problem is one thing wrong with a lifecycle.
type Problem struct {
	Rule Rule
	// State is the state at fault, if one is.
	State string
	// Transfer is the index in Transfers of the transfer at fault, or -1.
	Transfer int
	Message  string
}

func (p Problem) String() string {
	switch {
	case p.Transfer >= 0:
		return fmt.Sprintf("transfers[%d]: %s", p.Transfer, p.Message)
	case p.State != "":
		return fmt.Sprintf("states.%s: %s", p.State, p.Message)
	}
	return p.Message
}

// CheckError is a lifecycle that fails Check, with every problem found.
type CheckError struct {
	Lifecycle string
	Problems  []Problem
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lifecycle %q: %d problem", e.Lifecycle, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteByte('s')
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Check reports every problem of the lifecycle at once, as a *CheckError,
// or nil. The rules (each a Rule):
//
//   - the lifecycle has a name; every state is keyed by its name and has
//     a valid model state; a state does not both export and purge, and an
//     inactive or terminal state does neither;
//   - start names a state, and not a terminal one; so does each of
//     initial_states, listed once, whose model state is not active
//     either (a create writes the candidate set only, and an active
//     state builds from the active set);
//   - transfers name states that exist, with valid triggers and
//     operations;
//   - only auto and api transfers validate, and a validating transfer
//     has an error state; so has a resource transfer (a deploy can
//     fail), whose source state exports or purges (or there is no deploy
//     to wait for); a transfer that cannot fail has no error state nor
//     error operation;
//   - at most one transfer per source state and trigger, except api,
//     where it is one per source and target (a set-state request names
//     the target);
//   - terminal states have no transfer out, every other state has one,
//     and every state is reachable from start (or an initial state)
//     through targets and error states;
//   - no cycle of auto transfers without a validation: it would loop
//     forever (a cycle through an api, on_update, on_delete or resource
//     transfer waits for its event at that step);
//   - a config name only on an auto transfer (the others are not the
//     engine's to take), and a valid one (CheckConfigName).
func (l *Lifecycle) Check() error {
	c := checker{l: l}
	c.check()
	if len(c.problems) == 0 {
		return nil
	}
	return &CheckError{Lifecycle: l.Name, Problems: c.problems}
}

type checker struct {
	l        *Lifecycle
	problems []Problem
}

func (c *checker) add(rule Rule, state string, transfer int, format string, args ...any) {
	c.problems = append(c.problems, Problem{Rule: rule, State: state, Transfer: transfer, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) check() {
	l := c.l
	if l.Name == "" {
		c.add(RuleName, "", noTransfer, "the lifecycle has no name")
	}
	names := l.stateNames()
	for _, key := range names {
		s := l.States[key]
		switch {
		case key == "":
			c.add(RuleStateName, "", noTransfer, "a state has an empty name")
		case s.Name != key:
			c.add(RuleStateName, key, noTransfer, "is named %q, not by its key", s.Name)
		}
		if !s.ModelState.valid() {
			c.add(RuleModelState, key, noTransfer, "model state %q is none of inactive, candidate, designed, active", s.ModelState)
		}
		switch {
		case s.Export && s.Purge:
			c.add(RuleStateExport, key, noTransfer, "both exports and purges its resources")
		case (s.Export || s.Purge) && s.Terminal:
			c.add(RuleStateExport, key, noTransfer, "is terminal (its resources are removed) but %s them", exportVerb(s))
		case (s.Export || s.Purge) && s.ModelState == Inactive:
			c.add(RuleStateExport, key, noTransfer, "is inactive (never in the model) but %s its resources", exportVerb(s))
		}
	}
	switch start, ok := l.States[l.Start]; {
	case l.Start == "":
		c.add(RuleStart, "", noTransfer, "the lifecycle has no start state")
	case !ok:
		c.add(RuleStart, "", noTransfer, "start state %q does not exist", l.Start)
	case start.Terminal:
		c.add(RuleStart, l.Start, noTransfer, "the start state is terminal")
	}
	for i, name := range l.InitialStates {
		switch st, ok := l.States[name]; {
		case !ok:
			c.add(RuleInitial, "", noTransfer, "initial state %q does not exist", name)
		case slices.Index(l.InitialStates, name) < i:
			c.add(RuleInitial, name, noTransfer, "is listed in initial_states more than once")
		case st.Terminal:
			c.add(RuleInitial, name, noTransfer, "is terminal, so it cannot be an initial state")
		case st.ModelState == Active:
			c.add(RuleInitial, name, noTransfer, "has model state active, so it cannot be an initial state: a create writes the candidate set only")
		}
	}

	type key struct {
		source  string
		trigger Trigger
		target  string
	}
	first := map[key]int{}
	for i, t := range l.Transfers {
		for _, ref := range []struct{ field, state string }{{"source", t.Source}, {"target", t.Target}, {"error", t.Error}} {
			if _, ok := l.States[ref.state]; !ok && (ref.state != "" || ref.field != "error") {
				c.add(RuleUnknownState, "", i, "%s state %q does not exist", ref.field, ref.state)
			}
		}
		if !t.Trigger.valid() {
			c.add(RuleTrigger, "", i, "trigger %q is none of auto, api, on_update, on_delete, resource", t.Trigger)
		}
		for _, ops := range []struct {
			field string
			ops   []Operation
		}{{"target_operation", t.TargetOperation}, {"error_operation", t.ErrorOperation}} {
			for _, op := range ops.ops {
				if !op.valid() {
					c.add(RuleOperation, "", i, "%s %q is none of clear candidate, clear active, clear rollback, promote, rollback", ops.field, op)
				}
			}
		}
		if t.Validate && t.Trigger != Auto && t.Trigger != API && t.Trigger.valid() {
			c.add(RuleValidate, "", i, "a %s transfer cannot validate; only auto and api transfers do", t.Trigger)
		}
		if t.Validate && t.Error == "" {
			c.add(RuleValidate, "", i, "validates but has no error state to go to when the validation fails")
		}
		if t.Trigger == Resource {
			if t.Error == "" {
				c.add(RuleResource, "", i, "is resource-triggered but has no error state to go to when the deploy fails")
			}
			if s, ok := l.States[t.Source]; ok && !s.Export && !s.Purge {
				c.add(RuleResource, "", i, "is resource-triggered but its source state %q neither exports nor purges resources", t.Source)
			}
		}
		if !t.canFail() {
			if t.Error != "" {
				c.add(RuleErrorUnused, "", i, "has an error state, but neither validates nor is resource-triggered, so it cannot fail")
			} else if len(t.ErrorOperation) > 0 {
				c.add(RuleErrorUnused, "", i, "has an error_operation but no error state")
			}
		} else if t.Error == "" && len(t.ErrorOperation) > 0 {
			c.add(RuleErrorUnused, "", i, "has an error_operation but no error state")
		}
		k := key{source: t.Source, trigger: t.Trigger}
		if t.Trigger == API {
			k.target = t.Target
		}
		if j, dup := first[k]; dup {
			if t.Trigger == API {
				c.add(RuleDuplicate, "", i, "transfers[%d] is already the api transfer from %q to %q", j, t.Source, t.Target)
			} else {
				c.add(RuleDuplicate, "", i, "transfers[%d] is already the %s transfer from %q", j, t.Trigger, t.Source)
			}
		} else {
			first[k] = i
		}
		if s, ok := l.States[t.Source]; ok && s.Terminal {
			c.add(RuleTerminalOut, "", i, "leaves terminal state %q", t.Source)
		}
		if t.ConfigName != "" {
			if t.Trigger != Auto && t.Trigger.valid() {
				c.add(RuleConfigName, "", i, "a %s transfer has config_name %q; only auto transfers are switched by a config name", t.Trigger, t.ConfigName)
			} else if err := CheckConfigName(t.ConfigName); err != nil {
				c.add(RuleConfigName, "", i, "%v", err)
			}
		}
	}

	out := map[string]bool{}
	for _, t := range l.Transfers {
		out[t.Source] = true
	}
	for _, name := range names {
		if !l.States[name].Terminal && !out[name] {
			c.add(RuleNoWayOut, name, noTransfer, "no transfer leaves this state, and it is not terminal")
		}
	}
	if _, ok := l.States[l.Start]; ok {
		reached := l.reachable()
		for _, name := range names {
			if !reached[name] {
				c.add(RuleUnreachable, name, noTransfer, "cannot be reached from the start state %q%s", l.Start, l.orInitial())
			}
		}
	}
	for _, loop := range l.autoLoops() {
		c.add(RuleAutoLoop, loop[0], noTransfer, "auto transfers that do not validate loop forever among the states %s", strings.Join(loop, ", "))
	}
}

// orInitial says " or an initial state" when the lifecycle has some.
func (l *Lifecycle) orInitial() string {
	if len(l.InitialStates) > 0 {
		return " or an initial state"
	}
	return ""
}

func exportVerb(s State) string {
	if s.Export {
		return "exports"
	}
	return "purges"
}

// stateNames returns the keys of States, sorted.
func (l *Lifecycle) stateNames() []string {
	names := make([]string, 0, len(l.States))
	for k := range l.States {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// reachable returns the states reachable from Start and the initial
// states through the targets and error states of transfers.
func (l *Lifecycle) reachable() map[string]bool {
	seen := map[string]bool{l.Start: true}
	queue := []string{l.Start}
	for _, s := range l.InitialStates {
		if _, ok := l.States[s]; ok && !seen[s] {
			seen[s] = true
			queue = append(queue, s)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, t := range l.Transfers {
			if t.Source != s {
				continue
			}
			for _, next := range []string{t.Target, t.Error} {
				if _, ok := l.States[next]; ok && next != "" && !seen[next] {
					seen[next] = true
					queue = append(queue, next)
				}
			}
		}
	}
	return seen
}

// autoLoops returns the cycles of the graph of auto transfers that do
// not validate, each as the states of one strongly connected component
// (sorted), in the order of their first state.
func (l *Lifecycle) autoLoops() [][]string {
	next := map[string][]string{}
	self := map[string]bool{}
	for _, t := range l.Transfers {
		if t.Trigger != Auto || t.Validate {
			continue
		}
		if _, ok := l.States[t.Target]; !ok {
			continue
		}
		next[t.Source] = append(next[t.Source], t.Target)
		if t.Source == t.Target {
			self[t.Source] = true
		}
	}
	// Tarjan's strongly connected components.
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var loops [][]string
	var visit func(string)
	visit = func(v string) {
		index[v] = len(index)
		low[v] = index[v]
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range next[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		if len(comp) > 1 || self[v] {
			slices.Sort(comp)
			loops = append(loops, comp)
		}
	}
	for _, s := range l.stateNames() {
		if _, seen := index[s]; !seen {
			visit(s)
		}
	}
	slices.SortFunc(loops, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return loops
}
