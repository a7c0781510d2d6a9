package lsm

// Simple returns the built-in lifecycle "simple" of docs/lsm.md: create,
// validate, deploy; update with validation and rollback of a failed
// deploy; delete. intend.dev/std/lsm declares the same value as
// lsm.simple (a test holds the two equal). Each call returns a new value.
func Simple() Lifecycle {
	states := []State{
		{Name: "start", ModelState: Candidate, Description: "where a create puts the instance"},
		{Name: "rejected", ModelState: Inactive, Description: "validation of the create failed"},
		{Name: "acknowledged", ModelState: Designed, Description: "validated, queued to become active"},
		{Name: "creating", ModelState: Active, Export: true, Description: "being deployed"},
		{Name: "up", ModelState: Active, Export: true, Description: "deployed"},
		{Name: "failed", ModelState: Active, Export: true, Description: "the first deploy failed"},
		{Name: "update_start", ModelState: Candidate, Export: true, Description: "an update waits for validation; the active set stays exported"},
		{Name: "update_rejected", ModelState: Active, Export: true, Description: "validation of the update failed"},
		{Name: "update_acknowledged", ModelState: Designed, Export: true, Description: "the update is validated; the active set stays exported"},
		{Name: "updating", ModelState: Active, Export: true, Description: "the update is being deployed"},
		{Name: "update_failed", ModelState: Active, Export: true, Description: "the update's deploy failed"},
		{Name: "rolling_back", ModelState: Active, Export: true, Description: "the previous attributes are being deployed again"},
		{Name: "deleting", ModelState: Active, Purge: true, Description: "the resources are being removed"},
		{Name: "delete_failed", ModelState: Active, Purge: true, Description: "removing the resources failed"},
		{Name: "terminated", ModelState: Inactive, Terminal: true, Description: "gone"},
	}
	l := Lifecycle{
		Name:   "simple",
		Start:  "start",
		States: make(map[string]State, len(states)),
		Transfers: []Transfer{
			{Source: "start", Target: "acknowledged", Error: "rejected", Trigger: Auto, Validate: true,
				Description: "validate the create"},
			{Source: "rejected", Target: "start", Trigger: OnUpdate,
				Description: "try again with new attributes"},
			{Source: "rejected", Target: "terminated", Trigger: OnDelete,
				Description: "delete what was never deployed"},
			{Source: "acknowledged", Target: "creating", Trigger: Auto, TargetOperation: []Operation{Promote},
				Description: "make the validated attributes active and deploy them"},
			{Source: "creating", Target: "up", Error: "failed", Trigger: Resource,
				Description: "the deploy ended"},
			{Source: "failed", Target: "creating", Trigger: API,
				Description: "retry the deploy"},
			{Source: "failed", Target: "deleting", Trigger: OnDelete,
				Description: "delete"},
			{Source: "up", Target: "update_start", Trigger: OnUpdate,
				Description: "update"},
			{Source: "update_start", Target: "update_acknowledged", Error: "update_rejected", Trigger: Auto, Validate: true,
				Description: "validate the update"},
			{Source: "update_rejected", Target: "up", Trigger: Auto, TargetOperation: []Operation{ClearCandidate},
				Description: "drop the refused attributes"},
			{Source: "update_acknowledged", Target: "updating", Trigger: Auto, TargetOperation: []Operation{Promote},
				Description: "make the validated attributes active and deploy them"},
			{Source: "updating", Target: "up", Error: "update_failed", Trigger: Resource,
				Description: "the deploy ended"},
			{Source: "update_failed", Target: "rolling_back", Trigger: Auto, TargetOperation: []Operation{Rollback},
				Description: "deploy the previous attributes again; the failed ones stay visible as the candidate set"},
			{Source: "rolling_back", Target: "up", Error: "failed", Trigger: Resource,
				Description: "the deploy of the previous attributes ended"},
			{Source: "up", Target: "deleting", Trigger: OnDelete,
				Description: "delete"},
			{Source: "deleting", Target: "terminated", Error: "delete_failed", Trigger: Resource,
				Description: "the removal ended"},
			{Source: "delete_failed", Target: "deleting", Trigger: API,
				Description: "retry the removal"},
			{Source: "delete_failed", Target: "deleting", Trigger: OnDelete,
				Description: "retry the removal"},
		},
	}
	for _, s := range states {
		l.States[s.Name] = s
	}
	return l
}
