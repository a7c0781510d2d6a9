package lsm

import (
	"fmt"
	"slices"
	"strings"
)

// Event is what happened to an instance: a request (api, on_update,
// on_delete), the end of a deploy (resource) or its arrival in a state
// (auto). Target names the state an api event asks for; other triggers
// ignore it.
type Event struct {
	Trigger Trigger `json:"trigger"`
	Target  string  `json:"target,omitempty"`
}

func (e Event) String() string {
	switch e.Trigger {
	case API:
		return fmt.Sprintf("api to %q", e.Target)
	case CreateTrigger:
		return fmt.Sprintf("create in %q", e.Target)
	}
	return string(e.Trigger)
}

// UnknownStateError is an event for a state the lifecycle does not have.
type UnknownStateError struct {
	Lifecycle string
	State     string
}

func (e *UnknownStateError) Error() string {
	return fmt.Sprintf("lifecycle %q has no state %q", e.Lifecycle, e.State)
}

// IllegalEventError is an event no transfer of the instance's state
// takes: the REST layer's 409, which lists what the state allows.
type IllegalEventError struct {
	State string
	Event Event
	// Allowed are the events the state has a transfer for, in the order
	// of the triggers (auto, api, on_update, on_delete, resource), api
	// events by target. Auto and resource events are the server's own,
	// not a client's to send.
	Allowed []Event
}

func (e *IllegalEventError) Error() string {
	if len(e.Allowed) == 0 {
		return fmt.Sprintf("state %q allows no %s, nor anything else", e.State, e.Event)
	}
	allowed := make([]string, len(e.Allowed))
	for i, a := range e.Allowed {
		allowed[i] = a.String()
	}
	return fmt.Sprintf("state %q allows no %s; it allows %s", e.State, e.Event, strings.Join(allowed, ", "))
}

// Next returns the transfer the event causes in state: the one with the
// event's trigger leaving state (and, for api, going to the event's
// target). An event no transfer takes is an *IllegalEventError; a state
// the lifecycle does not have an *UnknownStateError. The lifecycle is
// assumed to pass Check: with duplicates, the first transfer wins.
func (l *Lifecycle) Next(state string, ev Event) (Transfer, error) {
	if _, ok := l.States[state]; !ok {
		return Transfer{}, &UnknownStateError{Lifecycle: l.Name, State: state}
	}
	for _, t := range l.Transfers {
		if t.Source == state && t.Trigger == ev.Trigger && (ev.Trigger != API || t.Target == ev.Target) {
			return t, nil
		}
	}
	return Transfer{}, &IllegalEventError{State: state, Event: ev, Allowed: l.Allowed(state)}
}

// Allowed returns the events state has a transfer for, as
// IllegalEventError.Allowed lists them.
func (l *Lifecycle) Allowed(state string) []Event {
	var out []Event
	for _, t := range l.Transfers {
		if t.Source != state {
			continue
		}
		ev := Event{Trigger: t.Trigger}
		if t.Trigger == API {
			ev.Target = t.Target
		}
		if !slices.Contains(out, ev) {
			out = append(out, ev)
		}
	}
	rank := func(t Trigger) int {
		if i := slices.Index(triggers, t); i >= 0 {
			return i
		}
		return len(triggers)
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		if d := rank(a.Trigger) - rank(b.Trigger); d != 0 {
			return d
		}
		return strings.Compare(a.Target, b.Target)
	})
	return out
}

// AutoFrom returns the auto transfer leaving state, if there is one: the
// engine takes it as soon as the instance arrives there.
func (l *Lifecycle) AutoFrom(state string) (Transfer, bool) {
	for _, t := range l.Transfers {
		if t.Source == state && t.Trigger == Auto {
			return t, true
		}
	}
	return Transfer{}, false
}
