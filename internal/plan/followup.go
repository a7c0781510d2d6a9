package plan

import (
	"fmt"
	"sort"
	"time"

	"github.com/intendhq/intend/internal/ledger"
)

// Follow-up rules. Recording outcomes can queue automatic requests:
//
//   - a deploy of the resources that were skipped because a resource they
//     require was not deployed (skipped_for_dependency) or was undefined
//     (skipped_for_undefined), once that resource is deployed: "dependency
//     X recovered";
//   - a repair of the resources with receive_events that require a
//     resource with send_event that was just deployed with a change, limited
//     to those not attempted since: "event from X".
//
// Which resources are dependents is the store's to find (it reads the
// environment's deploy state); what triggers the rules, which requests
// they make and how they are worded is decided here.

// Outcome is one recorded attempt, as the follow-up rules see it.
type Outcome struct {
	ResourceID string
	Action     string // deploy, repair or dryrun
	Result     string
	// Changed: the attempt changed the target.
	Changed    bool
	FinishedAt time.Time
}

// Triggers are the outcomes that can call for follow-ups.
type Triggers struct {
	// Deployed are the indices of the outcomes that deployed their
	// resource (a dry-run never triggers anything), in order.
	Deployed []int
	// Changed are those of Deployed that changed the target: their
	// resources' events, if they send any, go out.
	Changed []int
	// At is the latest finish among Deployed: an event's repair is for
	// the receivers not attempted since.
	At time.Time
}

// FollowUpTriggers picks the outcomes that can call for follow-ups.
func FollowUpTriggers(outs []Outcome) Triggers {
	var t Triggers
	for i, o := range outs {
		if o.Action == string(ledger.ActionDryrun) || !ledger.Result(o.Result).AsIntended() {
			continue
		}
		t.Deployed = append(t.Deployed, i)
		if o.Changed {
			t.Changed = append(t.Changed, i)
		}
		if o.FinishedAt.After(t.At) {
			t.At = o.FinishedAt
		}
	}
	return t
}

// Dependent is a resource that requires a trigger's resource (Cause).
type Dependent struct {
	ID    string
	Cause string
}

// FollowUp is an automatic request to queue.
type FollowUp struct {
	Kind        string // deploy or repair
	ResourceIDs []string
	Reason      string
	// StaleBefore limits a repair to the resources not attempted since.
	StaleBefore *time.Time
}

// Recovery is the deploy of the dependents that were skipped because of a
// resource now deployed; false when there are none.
func Recovery(skipped []Dependent) (FollowUp, bool) {
	ids, causes := collect(skipped)
	if len(ids) == 0 {
		return FollowUp{}, false
	}
	return FollowUp{Kind: "deploy", ResourceIDs: ids, Reason: about("dependency", causes, "recovered")}, true
}

// Events is the repair of the receivers of events sent by resources that
// changed, for those not attempted since at; false when there are none.
func Events(receivers []Dependent, at time.Time) (FollowUp, bool) {
	ids, causes := collect(receivers)
	if len(ids) == 0 {
		return FollowUp{}, false
	}
	return FollowUp{Kind: "repair", ResourceIDs: ids, StaleBefore: &at, Reason: about("event from", causes, "")}, true
}

// collect returns the distinct dependents, in the order they first appear,
// and the distinct causes, sorted.
func collect(deps []Dependent) (ids, causes []string) {
	seenID, seenCause := map[string]bool{}, map[string]bool{}
	for _, d := range deps {
		if !seenID[d.ID] {
			seenID[d.ID] = true
			ids = append(ids, d.ID)
		}
		if !seenCause[d.Cause] {
			seenCause[d.Cause] = true
			causes = append(causes, d.Cause)
		}
	}
	sort.Strings(causes)
	return ids, causes
}

// about phrases a reason: "dependency X recovered", "event from X and 2
// more".
func about(prefix string, causes []string, suffix string) string {
	s := prefix + " " + causes[0]
	if len(causes) > 1 {
		s += fmt.Sprintf(" and %d more", len(causes)-1)
	}
	if suffix != "" {
		s += " " + suffix
	}
	return s
}
