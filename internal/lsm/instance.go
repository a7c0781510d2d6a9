package lsm

import "time"

// Instance is a service instance as the inventory holds it: what the
// lifecycle engine writes with every transfer, what the store reads and
// what the API and an instance workflow's updates return.
type Instance struct {
	ID       string `json:"id"`
	Entity   string `json:"service_entity"`
	Identity string `json:"identity,omitempty"`
	State    string `json:"state"`
	// Version is the instance's current version: every transfer adds one,
	// and every write must name it (as current_version).
	Version int64 `json:"version"`
	// EntityVersion is the version of the entity the instance is of:
	// its active set's, or before it has one its candidate set's
	// (Sets.EntityVersion).
	EntityVersion int `json:"service_entity_version"`
	Sets
	// Metadata are the instance's free key/values (docs/lsm.md,
	// "Metadata"): no lifecycle reads them, and writing them takes no
	// transfer.
	Metadata  map[string]any `json:"metadata,omitempty"`
	Deleted   bool           `json:"deleted"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"last_updated"`
}
