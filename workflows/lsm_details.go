package workflows

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// What an operator sees of a service instance in the Temporal UI besides
// its id and static summary: the search attribute IntendInstanceState,
// kept equal to the instance's state, a memo with its REST URLs
// (InstanceMemo) and the current details: state, version and the last
// error.

// SearchAttrInstanceState is an instance workflow's current state (see
// temporal.yaml): set at start when the state is known (a workflow
// restarted from PostgreSQL), then upserted whenever the workflow settles
// after transfers (publishState).
const SearchAttrInstanceState = "IntendInstanceState"

// instanceStateChange is the workflow.GetVersion change id of the
// IntendInstanceState upserts in runs of generation 0 and 1: a run
// recorded before them replays without upserts (no marker), and a run of
// those generations started by this code upserts from its first
// run on (stateAttrOn). Generation 2 upserts without a marker.
const instanceStateChange = "instance-state-search-attribute"

// maxInstanceError bounds the last error an instance's details show.
const maxInstanceError = 1000

// InstanceMemo is the memo of an instance's workflow: the REST paths of
// the instance and of its log, relative to the intend server's address,
// and the environment the /lsm API wants in its X-Intend-Environment
// header.
func InstanceMemo(env, entity, id string) map[string]any {
	i := "/lsm/v1/service_inventory/" + url.PathEscape(entity) + "/" + url.PathEscape(id)
	return map[string]any{"instance": i, "log": i + "/log", "environment": env}
}

// stateAttrOn says whether the run keeps IntendInstanceState up to date.
// The SDK keeps a change's version for the rest of the run: a run of
// generation 0 or 1 that was under way when this code came replays its
// history without the marker and so goes on without upserts; its next run
// (continue-as-new, or a restart from PostgreSQL) has them.
func (w *instanceWorkflow) stateAttrOn(ctx workflow.Context) bool {
	if w.in.Generation >= 2 {
		return true
	}
	return workflow.GetVersion(ctx, instanceStateChange, workflow.DefaultVersion, 1) == 1
}

// publishState upserts IntendInstanceState when it differs from the
// instance's state (the workflow's own search attributes say what it is:
// the start's, carried across continue-as-new, and the upserts since).
// The main loop calls it each time advance has run what the state calls
// for, before it waits (for a deploy, a request, a signal) or ends: the
// state the instance rests or waits in. The states auto transfers pass
// through in the same moment (start, acknowledged) are not published:
// each upsert is a write of the Temporal server's visibility store, and a
// create -> up costs two instead of four.
func (w *instanceWorkflow) publishState(ctx workflow.Context) {
	if w.st.State == "" || !w.stateAttrOn(ctx) {
		return
	}
	key := temporal.NewSearchAttributeKeyKeyword(SearchAttrInstanceState)
	if cur, ok := workflow.GetTypedSearchAttributes(ctx).GetKeyword(key); ok && cur == w.st.State {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, key.ValueSet(w.st.State)); err != nil {
		// Only a value the SDK cannot encode fails here; the instance
		// works on without its search attribute.
		workflow.GetLogger(ctx).Warn("upsert search attribute", "error", err)
	}
}

// noteError keeps what went wrong for the current details.
func (w *instanceWorkflow) noteError(what string, errs json.RawMessage) {
	msg := what
	if len(errs) > 0 && string(errs) != "null" {
		msg += ": " + string(errs)
	}
	w.lastError = fmt.Sprintf("at version %d (state %s): %s", w.st.Version, w.st.State, truncate(msg, maxInstanceError))
}

// showDetails sets the workflow's current details.
func (w *instanceWorkflow) showDetails(ctx workflow.Context) {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s** `%s`", w.in.Entity.Name, w.in.InstanceID)
	if w.st.Identity != "" && w.st.Identity != w.in.InstanceID {
		fmt.Fprintf(&b, " (%s)", w.st.Identity)
	}
	if w.st.Version == 0 {
		b.WriteString(": waiting for its create\n")
	} else {
		fmt.Fprintf(&b, ": state **%s**, version %d\n", w.st.State, w.st.Version)
	}
	if w.in.AutoTransfersOff {
		b.WriteString("\nAuto transfers are off for the entity.\n")
	}
	if w.in.InstanceAutoTransfersOff {
		b.WriteString("\nAuto transfers are off for the instance.\n")
	}
	if w.lastError != "" {
		fmt.Fprintf(&b, "\n**Last error** %s\n", w.lastError)
	}
	workflow.SetCurrentDetails(ctx, b.String())
}
