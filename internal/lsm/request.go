package lsm

import (
	"context"
	"errors"
)

// The lifecycle's contract (docs/architecture.md, "The lifecycle in one
// place"): what a write to a service instance is, how the engine refuses
// one, and the ports the transports (the API, the order activities) send
// writes through. The engine behind the ports is Temporal's (package
// server/engine: one workflow per instance); nothing here does I/O.

// The operations of a write (Request.Op). Orders take the first four.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
	// OpMigrate moves an instance to a newer version of its entity:
	// Request.Entity is the target version, Attributes the mapped set
	// (and the items of a bulk migration: POST
	// /lsm/v1/service_catalog/{entity}/migrate).
	OpMigrate = "migrate"
	// OpSetState takes the api transfer to Request.Target.
	OpSetState = "set_state"
	// OpExpert forces Request.Expert, past the lifecycle.
	OpExpert = "expert"
)

// Env is what a write needs of its environment.
type Env struct {
	ID   string
	Name string
}

// Request is one write to a service instance, as a transport hands it
// to the Engine.
type Request struct {
	Env Env
	// Entity is the catalog's entity: the instance's workflow judges the
	// request with its attributes and lifecycle.
	Entity     Entity
	InstanceID string
	// Op is one of the Op* constants.
	Op string
	// UpdateID identifies the request to the engine, which applies an id
	// once: the Idempotency-Key (with its endpoint), or a fresh id.
	UpdateID string
	// CurrentVersion is the version the client saw (all but a create).
	CurrentVersion int64
	// Attributes are the create's attributes or the update's whole new
	// candidate set.
	Attributes map[string]any
	// Target is the state a set-state asks for, or the initial state a
	// create names ("": the lifecycle's start state).
	Target string
	// Idempotent, when the client sent a key, makes the engine store the
	// instance as written as the first response, with the transfer.
	Idempotent *IdempotentRequest
	// Actor is who asked (auth.Principal.Actor), kept in the instance's
	// log with the transfer.
	Actor string
	// AutoTransfersOff is the entity's config as the request read it: a
	// create's workflow starts with it.
	AutoTransfersOff bool
	// AutoTransferConfigs is the entity's config per config name as the
	// request read it (AutoConfig.Entity): a create's workflow starts
	// with it.
	AutoTransferConfigs map[string]bool
	// Expert is what an expert transfer forces (OpExpert).
	Expert *ExpertChange
}

// ExpertChange is what an expert transfer forces. Each Set* says whether
// its set is replaced by the matching map; State "" keeps the state.
// Its fields are the expert update's (workflows.ExpertRequest embeds it).
type ExpertChange struct {
	State        string
	SetCandidate bool
	Candidate    map[string]any
	SetActive    bool
	Active       map[string]any
	SetRollback  bool
	Rollback     map[string]any
	Reason       string
}

// Engine applies the writes to service instances: one workflow per
// instance (server/engine.LSM).
type Engine interface {
	// Send sends req to the instance's workflow (a create starts it) and
	// waits until it completed: the transfer is written, and the instance
	// as written is returned. The engine applies an UpdateID once, so
	// sending the same request twice is safe. Errors: a *Rejection when
	// the workflow refused the request (nothing was written); ErrPending
	// when it was accepted (it will be applied) but did not complete
	// within the engine's wait; ErrUnavailable (wrapped) when the engine
	// could not be reached or did not take the request in time. Safe for
	// concurrent use.
	Send(ctx context.Context, req Request) (Instance, error)

	// ModelChanged tells the environment's live instances that its model
	// source is now hash, so that they export their resources again,
	// built by it (durably: a workflow does it). Safe for concurrent use.
	ModelChanged(ctx context.Context, env Env, hash string) error
}

var (
	// ErrPending: the request was accepted but not applied within the
	// wait; it will be.
	ErrPending = errors.New("the request was accepted and is still being applied")
	// ErrUnavailable: the engine (Temporal) is unreachable or did not
	// take the request in time.
	ErrUnavailable = errors.New("the lifecycle engine is unavailable")
)

// Rejection is a request the instance's workflow refused: nothing was
// written.
type Rejection struct {
	// Reason is one of the Reject* constants.
	Reason  string
	Message string
	// Version is the instance's version (RejectStale).
	Version int64
	// State and Allowed are the instance's state and the events it has
	// transfers for (RejectIllegal).
	State   string
	Allowed []Event
	// Problems are the attributes at fault (RejectInvalid).
	Problems []AttributeProblem
	// Referrers are the instances that reference it (RejectReferenced).
	Referrers []Referrer
}

func (e *Rejection) Error() string { return e.Reason + ": " + e.Message }

// Referrer is a live instance that references another through one of its
// attributes.
type Referrer struct {
	Entity    string `json:"service_entity"`
	ID        string `json:"id"`
	Identity  string `json:"identity,omitempty"`
	Attribute string `json:"attribute"`
	State     string `json:"state"`
}
