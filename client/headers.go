package client

// The headers and event names of the API that are not in a body.
const (
	// EnvironmentHeader names the environment of an /lsm request (an id
	// or a name); WithHeader sets it on a client.
	EnvironmentHeader = "X-Intend-Environment"
	// IdempotencyKeyHeader names the optional key that makes an /lsm write
	// safe to repeat: the first response is stored for a day and returned
	// again.
	IdempotencyKeyHeader = "Idempotency-Key"
	// TransferEventName is the server-sent event name of a transfer
	// (TransferEvent) on an instance's event stream.
	TransferEventName = "transfer"
)
