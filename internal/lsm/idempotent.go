package lsm

// IdempotentRequest is a request that came with an Idempotency-Key: the
// endpoint it was used on (Scope, method and path: a key names one
// request per endpoint), the key, the hash of the method, path and body,
// and the status of the first response. The store keeps the instance as
// written as that response, in the transfer's transaction; the instance's
// workflow carries it from the request to that transaction. Its JSON (no
// tags: Scope, Key, Hash, Status) is in recorded workflow histories.
type IdempotentRequest struct {
	Scope  string
	Key    string
	Hash   []byte
	Status int
}
