package lsm

// Reasons the lifecycle engine refuses a request with: an instance's
// workflow rejects an update with a Temporal application error of this
// type, and the API's rejection carries it as its reason and maps it to
// its status.
const (
	// RejectStale: current_version is not the instance's version (409);
	// the error's details are the instance's version.
	RejectStale = "stale"
	// RejectIllegal: the state has no transfer for the request (409); the
	// details are the state and the transfers it allows.
	RejectIllegal = "illegal"
	// RejectInvalid: the attributes break their modifiers or the model
	// refuses them (422); the details are the []AttributeProblem.
	RejectInvalid = "invalid"
	// RejectBusy: the instance is applying a transfer (a previous
	// request's, or the auto, validation, export and deploy work that
	// followed it); the client tries again shortly (409).
	RejectBusy = "busy"
	// RejectExists: a create of an instance that exists (409).
	RejectExists = "exists"
	// RejectNotCreated: a request to an instance whose create has not
	// been applied (404).
	RejectNotCreated = "not_created"
	// RejectConflict: the store refused the write: another live instance
	// has the identity, or another writer moved the instance (409).
	// Activities return it, non-retryable.
	RejectConflict = "conflict"
	// RejectReferenced: a delete of an instance that live instances
	// reference (409); the details are the referrers.
	RejectReferenced = "referenced"
)
