// Package plan decides how a deploy run goes: which of its resources are
// held back because their intent is undefined, how the rest are ordered
// and cut into batches and levels, and which follow-up requests a run's
// outcomes call for. It decides and does not act: no database, no
// Temporal, no clock. The store reads the rows, calls it, and writes what
// it returns; the workflows carry its Batch references.
package plan

// Limits bound what one executor activity receives.
type Limits struct {
	MaxResources int // resources per batch
	MaxBytes     int // summed attribute bytes per batch (0 = no bound)
}

// DefaultLimits are the limits the deploy workflow uses unless told
// otherwise; see docs/architecture.md, "Batching".
var DefaultLimits = Limits{MaxResources: 500, MaxBytes: 1 << 20}

// Batch names one batch of a deploy run: all a workflow history holds
// about it. (No JSON tags: it travels in Temporal payloads, whose field
// names histories already hold.)
type Batch struct {
	Seq int
	// Agent is the batch's agent; of a batch of several agents (Agents),
	// the first of them by name.
	Agent string
	// Agents are the agents of a batch of several, sorted; nil for a
	// batch of one agent (every batch before DeployGeneration 3).
	Agents []string `json:",omitempty"`
	Level  int
	Count  int
	// First is the first resource id, for the activity's summary.
	First string
}

// Item is one resource of a run, as planning sees it.
type Item struct {
	ID    string
	Agent string
	// Group, when not empty, names the agents whose resources may share
	// a batch: one executor serves them all (their task queue). Items of
	// one group and one stage are cut into batches together; the items
	// of an agent without a group are cut alone.
	Group string
	// Requires are the ids of the resources it requires; those not in
	// the run are deployed already (or held: see Outside).
	Requires []string
	// Size is its attributes' size in bytes, counted against
	// Limits.MaxBytes.
	Size int
	// Undefined: its intent is undefined, so it is never sent to an
	// executor.
	Undefined bool
}

// The results a plan records itself for a held resource.
const (
	ResultUndefined           = "undefined"
	ResultSkippedForUndefined = "skipped_for_undefined"
)

// Held is a resource of the run that goes in no batch: the plan records
// it itself.
type Held struct {
	// Index is its index in the items given to Make.
	Index int
	// Result is ResultUndefined or ResultSkippedForUndefined.
	Result string
	// Why is the action record's error text.
	Why string
}

// AgentsOf returns the agents of batch b: Agents, or Agent alone.
func (b Batch) AgentsOf() []string {
	if len(b.Agents) > 0 {
		return b.Agents
	}
	return []string{b.Agent}
}

// Result is a run's plan.
type Result struct {
	// Order lists the indices (into the items given to Make) of the
	// resources in batches: the first Batches[0].Count are batch 1, the
	// next Batches[1].Count batch 2, and so on, each batch in the order
	// its executor runs it.
	Order []int
	// Batches are in (level, agent, stage) order, numbered from 1.
	Batches []Batch
	// Held are the resources in no batch, in id order.
	Held []Held
}

// Make plans a run: it holds back the undefined items and every item that
// requires one (directly, through other items, or an undefined resource
// outside the run: outside[id]), and cuts the rest into batches within
// limits (DefaultLimits when limits.MaxResources is not positive). Every
// item is either in Order once or in Held once. The plan depends on the
// items, not on their order.
func Make(items []Item, outside map[string]bool, limits Limits) Result {
	run, held := holdUndefined(items, outside)
	order, batches := cut(items, run, limits)
	return Result{Order: order, Batches: batches, Held: held}
}

// Outside returns the ids that items require but that are not among them,
// in the order they first appear: what to look up to fill Make's outside.
func Outside(items []Item) []string {
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		seen[it.ID] = true
	}
	var out []string
	for _, it := range items {
		for _, q := range it.Requires {
			if !seen[q] {
				seen[q] = true
				out = append(out, q)
			}
		}
	}
	return out
}
