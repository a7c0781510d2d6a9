package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// The bodies of the lifecycle service manager's writes (/lsm/v1). An
// instance's attributes are its entity's, so they stay a map: the
// entity's JSON Schemas are in GET /lsm/v1/openapi.json.

// CreateInstanceRequest is the body of POST
// /lsm/v1/service_inventory/{entity}.
type CreateInstanceRequest struct {
	Attributes map[string]any `json:"attributes"`
	// ID is the instance's id (a UUID); empty: the server makes one up.
	ID string `json:"service_instance_id,omitempty"`
	// EntityVersion is the version of the entity the instance is of;
	// 0: the latest.
	EntityVersion int `json:"service_entity_version,omitempty"`
}

// UpdateInstanceRequest is the body of PATCH
// /lsm/v1/service_inventory/{entity}/{id}: the attributes given replace
// the instance's by name.
type UpdateInstanceRequest struct {
	CurrentVersion int64          `json:"current_version"`
	Attributes     map[string]any `json:"attributes"`
}

// SetStateRequest is the body of POST /lsm/v1/services/{entity}/{id}/state.
type SetStateRequest struct {
	CurrentVersion int64  `json:"current_version"`
	TargetState    string `json:"target_state"`
}

// InstanceRollbackRequest is the body of POST
// /lsm/v1/service_inventory/{entity}/{id}/rollback: the attributes the
// instance had at ToVersion are sent as an update.
type InstanceRollbackRequest struct {
	CurrentVersion int64 `json:"current_version"`
	ToVersion      int64 `json:"to_version"`
}

// lsm is c with the environment header the /lsm routes take.
func (c *Client) lsm(env string) *Client { return c.WithHeader("X-Intend-Environment", env) }

// InventoryPath is the path of an entity's inventory, or of one instance
// (by id or identity) with more path elements after it.
func InventoryPath(entity string, more ...string) string {
	p := "/lsm/v1/service_inventory/" + url.PathEscape(entity)
	for _, m := range more {
		p += "/" + url.PathEscape(m)
	}
	return p
}

// Instance reads an instance of entity in env, by id or identity.
func (c *Client) Instance(ctx context.Context, env, entity, id string) (InstanceView, error) {
	var out InstanceView
	err := c.lsm(env).Do(ctx, http.MethodGet, InventoryPath(entity, id), nil, &out)
	return out, err
}

// CreateInstance creates an instance of entity in env.
func (c *Client) CreateInstance(ctx context.Context, env, entity string, body CreateInstanceRequest) (ServiceInstance, error) {
	var out ServiceInstance
	err := c.lsm(env).Do(ctx, http.MethodPost, InventoryPath(entity), body, &out)
	return out, err
}

// UpdateInstance changes an instance's attributes.
func (c *Client) UpdateInstance(ctx context.Context, env, entity, id string, body UpdateInstanceRequest) (ServiceInstance, error) {
	var out ServiceInstance
	err := c.lsm(env).Do(ctx, http.MethodPatch, InventoryPath(entity, id), body, &out)
	return out, err
}

// SetInstanceState asks for the lifecycle's api transfer to a state.
func (c *Client) SetInstanceState(ctx context.Context, env, entity, id string, body SetStateRequest) (ServiceInstance, error) {
	var out ServiceInstance
	err := c.lsm(env).Do(ctx, http.MethodPost,
		"/lsm/v1/services/"+url.PathEscape(entity)+"/"+url.PathEscape(id)+"/state", body, &out)
	return out, err
}

// DeleteInstance starts an instance's delete through its lifecycle.
func (c *Client) DeleteInstance(ctx context.Context, env, entity, id string, currentVersion int64) (ServiceInstance, error) {
	var out ServiceInstance
	err := c.lsm(env).Do(ctx, http.MethodDelete,
		InventoryPath(entity, id)+"?current_version="+strconv.FormatInt(currentVersion, 10), nil, &out)
	return out, err
}

// InstanceWriteDryrun is the body of a dry-run of a write to an instance
// (POST .../{id}/dryrun): Operation update (the default, with Attributes),
// delete, set_state (TargetState) or rollback (ToVersion); CurrentVersion
// 0 judges it against the instance's version.
type InstanceWriteDryrun struct {
	Operation      string         `json:"operation,omitempty"`
	CurrentVersion int64          `json:"current_version,omitempty"`
	Attributes     map[string]any `json:"attributes,omitempty"`
	TargetState    string         `json:"target_state,omitempty"`
	ToVersion      int64          `json:"to_version,omitempty"`
}

// DryrunInstanceWrite dry-runs a write to an instance: what it would do,
// changing nothing (a refusal is the write's problem).
func (c *Client) DryrunInstanceWrite(ctx context.Context, env, entity, id string, body InstanceWriteDryrun) (InstanceDryrunReport, error) {
	var out InstanceDryrunReport
	err := c.lsm(env).Do(ctx, http.MethodPost, InventoryPath(entity, id, "dryrun"), body, &out)
	return out, err
}
