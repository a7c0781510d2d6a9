package workflows

// ErrTypeReferenced: the store refused to delete (or purge) an instance
// that live instances reference (409); the details are the referrers, as
// JSON objects (service_entity, id, identity, attribute, state).
// ApplyTransfer returns it, non-retryable. Relations between instances
// are the store's and the activities' business (docs/architecture.md,
// "Relations between instances"): the workflow needs no change for them.
const ErrTypeReferenced = "referenced"
