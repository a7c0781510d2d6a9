package lsm

import (
	"reflect"
	"testing"
)

// instance is what the engine keeps of a service instance, enough to
// walk a lifecycle the way it will: requests write the candidate set,
// every event goes through Next, the outcome of a transfer that can fail
// picks target or error state, and the operations move the sets.
type instance struct {
	t     *testing.T
	l     Lifecycle
	state string
	sets  Sets
}

func create(t *testing.T, l Lifecycle, attrs map[string]any) *instance {
	return &instance{t: t, l: l, state: l.Start, sets: Sets{Candidate: attrs}}
}

// event fires ev; ok is the outcome of the validation or deploy when the
// transfer has one. It requires the state and sets to be want after it.
func (in *instance) event(ev Event, ok bool, wantState string, want Sets) {
	in.t.Helper()
	if ev.Trigger == Auto {
		if _, has := in.l.AutoFrom(in.state); !has {
			in.t.Fatalf("%s: no auto transfer", in.state)
		}
	}
	tr, err := in.l.Next(in.state, ev)
	if err != nil {
		in.t.Fatalf("%s: %v", in.state, err)
	}
	if tr.canFail() && !ok {
		in.state, in.sets = tr.Error, ApplyAll(tr.ErrorOperation, in.sets)
	} else {
		in.state, in.sets = tr.Target, ApplyAll(tr.TargetOperation, in.sets)
	}
	if in.state != wantState {
		in.t.Fatalf("%s took the instance to %s, want %s", ev, in.state, wantState)
	}
	if !reflect.DeepEqual(in.sets, want) {
		in.t.Fatalf("after %s to %s: sets %v, want %v", ev, in.state, in.sets, want)
	}
}

// update is a PATCH: the edited attributes become the candidate set.
func (in *instance) update(attrs map[string]any, wantState string, want Sets) {
	in.t.Helper()
	in.sets.Candidate = attrs
	in.event(Event{Trigger: OnUpdate}, true, wantState, want)
}

// createUp takes an instance of simple just created with attrs through
// its create, validated and deployed: acknowledged, creating, up.
func (in *instance) createUp(attrs map[string]any) {
	in.t.Helper()
	in.event(auto, true, "acknowledged", Sets{Candidate: attrs})
	in.event(auto, true, "creating", Sets{Active: attrs})
	in.event(deployed, true, "up", Sets{Active: attrs})
}

// updateToDeploy takes an instance of simple, up with active, through an
// update to attrs, validated, up to its deploy: update_start,
// update_acknowledged, updating.
func (in *instance) updateToDeploy(attrs, active map[string]any) {
	in.t.Helper()
	in.update(attrs, "update_start", Sets{Candidate: attrs, Active: active})
	in.event(auto, true, "update_acknowledged", Sets{Candidate: attrs, Active: active})
	in.event(auto, true, "updating", Sets{Active: attrs, Rollback: active})
}

var (
	auto     = Event{Trigger: Auto}
	deployed = Event{Trigger: Resource}
	del      = Event{Trigger: OnDelete}
)

func api(target string) Event { return Event{Trigger: API, Target: target} }

// TestWalkSimple walks simple through a create, an update and a delete
// that all succeed.
func TestWalkSimple(t *testing.T) {
	t.Parallel()
	a, b := attrs("vm", 2), attrs("vm", 4)
	in := create(t, Simple(), a)
	if in.state != "start" {
		t.Fatalf("a create starts in %s", in.state)
	}
	in.createUp(a)
	in.updateToDeploy(b, a)
	in.event(deployed, true, "up", Sets{Active: b, Rollback: a})
	in.event(del, true, "deleting", Sets{Active: b, Rollback: a})
	in.event(deployed, true, "terminated", Sets{Active: b, Rollback: a})
	if _, err := in.l.Next("terminated", del); err == nil {
		t.Error("a terminated instance takes a delete")
	}
}

// TestWalkSimpleFailures walks simple through every failure: a refused
// create, a failed first deploy and its retry, a refused update, a failed
// update and its rollback, a failed delete retried twice.
func TestWalkSimpleFailures(t *testing.T) {
	t.Parallel()
	a, a2, b, c := attrs("vm", 128), attrs("vm", 2), attrs("vm", 999), attrs("vm", 8)
	in := create(t, Simple(), a)
	in.event(auto, false, "rejected", Sets{Candidate: a})
	in.update(a2, "start", Sets{Candidate: a2})
	in.event(auto, true, "acknowledged", Sets{Candidate: a2})
	in.event(auto, true, "creating", Sets{Active: a2})
	in.event(deployed, false, "failed", Sets{Active: a2})
	in.event(api("creating"), true, "creating", Sets{Active: a2})
	in.event(deployed, true, "up", Sets{Active: a2})

	in.update(b, "update_start", Sets{Candidate: b, Active: a2})
	in.event(auto, false, "update_rejected", Sets{Candidate: b, Active: a2})
	in.event(auto, true, "up", Sets{Active: a2})

	in.updateToDeploy(c, a2)
	in.event(deployed, false, "update_failed", Sets{Active: c, Rollback: a2})
	// The failed attributes stay visible as the candidate set.
	in.event(auto, true, "rolling_back", Sets{Active: a2, Candidate: c})
	in.event(deployed, true, "up", Sets{Active: a2, Candidate: c})

	in.event(del, true, "deleting", Sets{Active: a2, Candidate: c})
	in.event(deployed, false, "delete_failed", Sets{Active: a2, Candidate: c})
	in.event(api("deleting"), true, "deleting", Sets{Active: a2, Candidate: c})
	in.event(deployed, false, "delete_failed", Sets{Active: a2, Candidate: c})
	in.event(del, true, "deleting", Sets{Active: a2, Candidate: c})
	in.event(deployed, true, "terminated", Sets{Active: a2, Candidate: c})
}

// TestWalkSimpleRollbackFails: when the rollback's deploy fails too, the
// instance ends in failed, from where a retry or a delete goes on.
func TestWalkSimpleRollbackFails(t *testing.T) {
	t.Parallel()
	a, b := attrs("vm", 2), attrs("vm", 4)
	in := create(t, Simple(), a)
	in.createUp(a)
	in.updateToDeploy(b, a)
	in.event(deployed, false, "update_failed", Sets{Active: b, Rollback: a})
	in.event(auto, true, "rolling_back", Sets{Active: a, Candidate: b})
	in.event(deployed, false, "failed", Sets{Active: a, Candidate: b})
	in.event(del, true, "deleting", Sets{Active: a, Candidate: b})
	in.event(deployed, true, "terminated", Sets{Active: a, Candidate: b})
}

// TestWalkSimpleRejectedDelete: a refused create can be deleted at once.
func TestWalkSimpleRejectedDelete(t *testing.T) {
	t.Parallel()
	a := attrs("vm", 128)
	in := create(t, Simple(), a)
	in.event(auto, false, "rejected", Sets{Candidate: a})
	in.event(del, true, "terminated", Sets{Candidate: a})
}
