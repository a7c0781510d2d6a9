package lsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Decide is the lifecycle's judgement of one write (a create, an update,
// a set-state or a delete) against an instance: refused, with the
// Rejection the client gets, or the transfer it takes and the sets that
// transfer starts from. The instance's workflow decides with it (its
// update validators and handlers), and so does the dry-run of a write,
// from the instance PostgreSQL holds: both judge alike. It is pure: no
// I/O, no clock, and neither the subject nor the request is modified.

// Subject is an instance as a decision sees it.
type Subject struct {
	// ID names the instance in messages.
	ID string
	// Version is the instance's version; 0: not created yet.
	Version int64
	State   string
	Sets    Sets
	// Busy: a transfer is being applied (the workflow's turn is taken).
	Busy bool
	// Lifecycle is the instance's entity's lifecycle.
	Lifecycle *Lifecycle
	// Entity is the entity a create makes the instance of (its
	// attributes, identity and version).
	Entity Entity
	// Attributes are the attributes of the entity version the current
	// set is of (Sets.CurrentVersion): an update is checked with them.
	Attributes []AttributeSpec
	// Auto switches the instance's auto transfers: one it does not take
	// (AutoConfig.Takes) is held, and a set-state to its target takes
	// it instead.
	Auto AutoConfig
}

// Decision is what a write does when it is not refused.
type Decision struct {
	// Transfer is the lifecycle's transfer the write takes; a create's
	// has Trigger "create" and goes to the lifecycle's start state, or
	// the initial state the create named (Request.Target).
	Transfer Transfer
	// Sets are the sets the transfer starts from (a create's and an
	// update's with the new candidate set), before its validation and
	// operations.
	Sets Sets
	// Identity is a create's identity ("" when the entity has none).
	Identity string
}

// CreateTrigger is the trigger a create is logged with.
const CreateTrigger Trigger = "create"

// Decide judges req (its Op, CurrentVersion, Attributes and Target: a
// set-state's target, a create's initial state) against s. Ops other than create, update, set_state and delete are
// refused as invalid: the instance's workflow judges expert transfers
// and migrations itself.
func Decide(s Subject, req Request) (Decision, *Rejection) {
	switch req.Op {
	case OpCreate:
		return decideCreate(s, req)
	case OpUpdate:
		t, rej := s.Transfer(req.CurrentVersion, Event{Trigger: OnUpdate})
		if rej != nil {
			return Decision{}, rej
		}
		if rej := invalid(CheckUpdate(s.Attributes, s.Sets.Current(), req.Attributes)); rej != nil {
			return Decision{}, rej
		}
		sets := s.Sets
		// An element an update adds gets its fields' defaults, as the
		// create's elements do.
		sets.Candidate, sets.CandidateVersion = WithEmbeddedDefaults(s.Attributes, req.Attributes), s.Sets.CurrentVersion()
		return Decision{Transfer: t, Sets: sets}, nil
	case OpSetState:
		t, rej := s.Transfer(req.CurrentVersion, Event{Trigger: API, Target: req.Target})
		if rej != nil && rej.Reason == RejectIllegal {
			if auto, ok := s.heldAuto(); ok && auto.Target == req.Target {
				return Decision{Transfer: auto, Sets: s.Sets}, nil
			}
		}
		if rej != nil {
			return Decision{}, rej
		}
		return Decision{Transfer: t, Sets: s.Sets}, nil
	case OpDelete:
		t, rej := s.Transfer(req.CurrentVersion, Event{Trigger: OnDelete})
		if rej != nil {
			return Decision{}, rej
		}
		return Decision{Transfer: t, Sets: s.Sets}, nil
	}
	return Decision{}, &Rejection{Reason: RejectInvalid, Message: fmt.Sprintf("%q is not a write a decision judges", req.Op)}
}

func decideCreate(s Subject, req Request) (Decision, *Rejection) {
	if s.Version > 0 || s.Busy {
		return Decision{}, &Rejection{Reason: RejectExists, Message: fmt.Sprintf("service instance %s exists", s.ID)}
	}
	if rej := invalid(CheckCreate(s.Entity.Attributes, req.Attributes)); rej != nil {
		return Decision{}, rej
	}
	start, rej := s.initialState(req.Target)
	if rej != nil {
		return Decision{}, rej
	}
	// The candidate set shows the defaults the model would use.
	attrs := WithDefaults(s.Entity.Attributes, req.Attributes)
	return Decision{
		Transfer: Transfer{Trigger: CreateTrigger, Target: start},
		Sets:     Sets{Candidate: attrs, CandidateVersion: s.Entity.Version},
		Identity: Identity(s.Entity.Identity, attrs),
	}, nil
}

// initialState is the state a create goes to: target, one of the
// lifecycle's initial states (Lifecycle.Initial), or its start state
// when target is "". Another is refused as RejectIllegal, with the
// initial states as create events in Allowed and no State.
func (s Subject) initialState(target string) (string, *Rejection) {
	initial := s.Lifecycle.Initial()
	if target == "" || slices.Contains(initial, target) {
		return cmp.Or(target, s.Lifecycle.Start), nil
	}
	allowed := make([]Event, len(initial))
	for i, st := range initial {
		allowed[i] = Event{Trigger: CreateTrigger, Target: st}
	}
	return "", &Rejection{Reason: RejectIllegal, Allowed: allowed, Message: fmt.Sprintf(
		"lifecycle %s allows no create in state %q; a create may begin in %s", s.Lifecycle.Name, target, quoteList(initial))}
}

// quoteList is names quoted and comma-separated.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// Ready checks what every write after the create must pass, the
// lifecycle's transfers aside: the instance exists, nobody is applying a
// transfer, and version is its version.
func (s Subject) Ready(version int64) *Rejection {
	if s.Version == 0 {
		return &Rejection{Reason: RejectNotCreated, Message: fmt.Sprintf("service instance %s is not created yet", s.ID)}
	}
	if s.Busy {
		return &Rejection{Reason: RejectBusy, Message: fmt.Sprintf(
			"service instance %s is applying a transfer (state %s, version %d); try again shortly", s.ID, s.State, s.Version)}
	}
	if version != s.Version {
		return &Rejection{Reason: RejectStale, Version: s.Version,
			Message: fmt.Sprintf("service instance %s is at version %d, not %d", s.ID, s.Version, version)}
	}
	return nil
}

// Transfer checks Ready and returns the transfer the state has for ev.
func (s Subject) Transfer(version int64, ev Event) (Transfer, *Rejection) {
	if rej := s.Ready(version); rej != nil {
		return Transfer{}, rej
	}
	t, err := s.Lifecycle.Next(s.State, ev)
	if err != nil {
		return t, &Rejection{Reason: RejectIllegal, Message: err.Error(), State: s.State, Allowed: s.Allowed()}
	}
	return t, nil
}

// heldAuto is the auto transfer the instance waits at because its
// config holds it (AutoConfig.Takes).
func (s Subject) heldAuto() (Transfer, bool) {
	t, ok := s.Lifecycle.AutoFrom(s.State)
	if !ok || s.Auto.Takes(t) {
		return Transfer{}, false
	}
	return t, true
}

// Allowed are the events the instance's state takes, as a refusal lists
// them: the auto transfer the instance's config holds it at is one a
// set-state to its target takes.
func (s Subject) Allowed() []Event {
	evs := s.Lifecycle.Allowed(s.State)
	if auto, ok := s.heldAuto(); ok {
		for i, ev := range evs {
			if ev.Trigger == Auto {
				evs[i] = Event{Trigger: API, Target: auto.Target}
			}
		}
	}
	return evs
}

// invalid makes an *AttributeError a RejectInvalid rejection with its
// problems (nil: nil).
func invalid(err error) *Rejection {
	if err == nil {
		return nil
	}
	var ae *AttributeError
	if errors.As(err, &ae) {
		return &Rejection{Reason: RejectInvalid, Message: ae.Error(), Problems: ae.Problems}
	}
	return &Rejection{Reason: RejectInvalid, Message: err.Error()}
}
