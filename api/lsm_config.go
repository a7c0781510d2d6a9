package api

import (
	"context"
	"net/http"

	"github.com/intendhq/intend/internal/store"
)

// A service entity's config (issue 14, B.7): PATCH
// /lsm/v1/service_catalog/{entity}/config stores it in the catalog (where
// GET shows it, as config) and tells the entity's live instances.

// LSMConfigNotifier is the optional capability of an lsm.Engine that tells
// an entity's live instances its new config; the config route asks
// s.opts.LSM for it.
type LSMConfigNotifier interface {
	// ConfigChanged tells every live instance of entity in env the
	// config c. Telling one twice is harmless. Safe for concurrent use.
	ConfigChanged(ctx context.Context, env store.Environment, entity string, c store.EntityConfig) error
}

// entityConfigRequest is the body of PATCH .../config: the keys it names
// change, the others stay.
type entityConfigRequest struct {
	AutoTransfers *bool `json:"auto_transfers"`
}

// patchEntityConfig changes an entity's config: 200 with the entity.
// The config is stored first, then the live instances are told; a
// failure to tell them is a 503 (the config stands: repeat the request
// and they are told again).
func (s *Server) patchEntityConfig(w http.ResponseWriter, r *http.Request) error {
	env, name, err := s.lsmEntityParam(r)
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), env.ID, name)
	if err != nil {
		return err
	}
	body, err := ReadBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return err
	}
	var req entityConfigRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	if req.AutoTransfers == nil {
		return InvalidField("/auto_transfers", "required: true (the engine takes the lifecycle's auto transfers) or false")
	}
	c := ent.Config
	c.AutoTransfers = *req.AutoTransfers
	n, ok := s.opts.LSM.(LSMConfigNotifier)
	if !ok {
		return Unavailable("the lifecycle engine is not running in this server to tell the live instances")
	}
	noteAudit(r, map[string]any{"entity": name, "config": c})
	if ent, err = s.opts.Store.SetEntityConfig(r.Context(), env.ID, name, c); err != nil {
		return err
	}
	if err := n.ConfigChanged(r.Context(), env, name, c); err != nil {
		s.log.WarnContext(r.Context(), "service entity config: instances not told", "environment", env.Name, "service_entity", name, "error", err)
		return Unavailable("the config is stored, but not every live instance could be told (the lifecycle engine, " +
			"Temporal, is unavailable); repeat the request")
	}
	WriteJSON(w, http.StatusOK, wireServiceEntity(ent))
	return nil
}
