package ledger

// Action is what an attempt on a resource is, and a deploy run's kind:
// ActionDeploy for a resource that is not compliant, ActionRepair for one
// re-verified, ActionDryrun for a dry-run's (which changes nothing). Runs,
// action records and the API carry its value.
type Action string

// The actions.
const (
	ActionDeploy Action = "deploy"
	ActionRepair Action = "repair"
	ActionDryrun Action = "dryrun"
)

// Result is how an attempt on a resource ended.
type Result string

// The results: deployed (as intended; a dry-run's: it would be), failed
// (the adapter's error), skipped (a report-only resource that differs),
// skipped for a dependency (a resource it requires is not deployed),
// unavailable (no executor ran its batch; the run records it, no
// executor does), and unmanaged (the model's unmanaged: true: the adapter
// was not called, and what requires it deploys as if it were deployed).
// A skipped result with error class skipped is an adapter's "skipped,
// retry later" (adapters.Skipped).
const (
	ResultDeployed             Result = "deployed"
	ResultFailed               Result = "failed"
	ResultSkipped              Result = "skipped"
	ResultSkippedForDependency Result = "skipped_for_dependency"
	ResultUnavailable          Result = "unavailable"
	ResultUnmanaged            Result = "unmanaged"
)

// AsIntended reports whether a resource with this result is as its intent
// asks (deployed, or unmanaged: left alone, as asked), so that what
// requires it may deploy.
func (r Result) AsIntended() bool { return r == ResultDeployed || r == ResultUnmanaged }
