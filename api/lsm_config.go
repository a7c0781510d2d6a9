package api

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
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
	// AutoTransferConfigs changes the entries it names: true or false
	// sets the name's switch, null removes the entry (the name is on for
	// an entity, the entity's for an instance).
	AutoTransferConfigs map[string]*bool `json:"auto_transfer_configs"`
}

// LSMInstanceConfigNotifier is the optional capability of an lsm.Engine
// that tells an instance's workflow the instance's new config.
type LSMInstanceConfigNotifier interface {
	// InstanceConfigChanged tells the live instance id of entity in env
	// its config c. Telling it twice is harmless. Safe for concurrent
	// use.
	InstanceConfigChanged(ctx context.Context, env store.Environment, entity, id string, c store.InstanceConfig) error
}

// apply checks req against the entity's lifecycle and applies it to the
// config's two keys; at least one key is required.
func (req entityConfigRequest) apply(ent store.ServiceEntity, on *bool, configs *map[string]bool) error {
	if req.AutoTransfers == nil && req.AutoTransferConfigs == nil {
		return InvalidField("/auto_transfers", "required: auto_transfers (true: the engine takes the lifecycle's auto transfers; "+
			"false: none) or auto_transfer_configs ({config name: true, false or null})")
	}
	names := lifecycleConfigNames(ent.Lifecycle)
	for _, name := range slices.Sorted(maps.Keys(req.AutoTransferConfigs)) {
		field := "/auto_transfer_configs/" + lsm.EscapePointer(name)
		if err := lsm.CheckConfigName(name); err != nil {
			return InvalidField(field, err.Error())
		}
		if req.AutoTransferConfigs[name] != nil && !slices.Contains(names, name) {
			return InvalidField(field, fmt.Sprintf("no auto transfer of lifecycle %s has config name %q (it has: %s)",
				ent.Lifecycle.Name, name, strings.Join(names, ", ")))
		}
	}
	if req.AutoTransfers != nil {
		*on = *req.AutoTransfers
	}
	if len(req.AutoTransferConfigs) > 0 {
		m := maps.Clone(*configs)
		if m == nil {
			m = map[string]bool{}
		}
		for name, v := range req.AutoTransferConfigs {
			if v == nil {
				delete(m, name)
			} else {
				m[name] = *v
			}
		}
		if len(m) == 0 {
			m = nil
		}
		*configs = m
	}
	return nil
}

// lifecycleConfigNames are the config names of l's auto transfers,
// sorted.
func lifecycleConfigNames(l lsm.Lifecycle) []string {
	var names []string
	for _, t := range l.Transfers {
		if t.Trigger == lsm.Auto && t.ConfigName != "" && !slices.Contains(names, t.ConfigName) {
			names = append(names, t.ConfigName)
		}
	}
	slices.Sort(names)
	return names
}

// configRequest reads the body of PATCH .../config (an entity's or an
// instance's).
func (s *Server) configRequest(r *http.Request) (entityConfigRequest, error) {
	var req entityConfigRequest
	body, err := ReadBody(r, s.opts.MaxBodyBytes)
	if err != nil {
		return req, err
	}
	return req, decodeJSON(body, &req)
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
	req, err := s.configRequest(r)
	if err != nil {
		return err
	}
	c := ent.Config
	if err := req.apply(ent, &c.AutoTransfers, &c.AutoTransferConfigs); err != nil {
		return err
	}
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

// An instance's own config (issue 31): GET and PATCH
// /lsm/v1/service_inventory/{entity}/{id}/config, the keys of the
// entity's config, over it (store.InstanceConfig). The answer shows the
// instance's config and the effective switch of each config name of the
// entity's lifecycle.

// instanceConfigView is the answer of the instance config routes.
func instanceConfigView(ent store.ServiceEntity, inst store.ServiceInstance, c store.InstanceConfig) client.InstanceConfig {
	auto := ent.Config.Auto(c)
	eff := client.EffectiveAutoConfig{AutoTransfers: !auto.Off && !auto.InstanceOff, AutoTransferConfigs: map[string]bool{}}
	for _, name := range lifecycleConfigNames(ent.Lifecycle) {
		eff.AutoTransferConfigs[name] = auto.Takes(lsm.Transfer{Trigger: lsm.Auto, ConfigName: name})
	}
	return client.InstanceConfig{ID: inst.ID, Entity: inst.Entity, AutoTransfers: c.AutoTransfers,
		AutoTransferConfigs: c.AutoTransferConfigs, Effective: eff}
}

// getInstanceConfig returns an instance's config.
func (s *Server) getInstanceConfig(w http.ResponseWriter, r *http.Request) error {
	env, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), env.ID, inst.Entity)
	if err != nil {
		return err
	}
	c, err := s.opts.Store.InstanceConfig(r.Context(), env.ID, inst.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, instanceConfigView(ent, inst, c))
	return nil
}

// patchInstanceConfig changes an instance's config: 200 with the
// config. Stored first, then the instance's workflow is told; a failure
// to tell it is a 503 (the config stands: repeat the request). A
// terminated instance has no auto transfers left: 409.
func (s *Server) patchInstanceConfig(w http.ResponseWriter, r *http.Request) error {
	env, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), env.ID, inst.Entity)
	if err != nil {
		return err
	}
	req, err := s.configRequest(r)
	if err != nil {
		return err
	}
	c, err := s.opts.Store.InstanceConfig(r.Context(), env.ID, inst.ID)
	if err != nil {
		return err
	}
	if err := req.apply(ent, &c.AutoTransfers, &c.AutoTransferConfigs); err != nil {
		return err
	}
	if inst.Deleted {
		return Conflict("service instance %s is terminated: it takes no more transfers", inst.ID)
	}
	n, ok := s.opts.LSM.(LSMInstanceConfigNotifier)
	if !ok {
		return Unavailable("the lifecycle engine is not running in this server to tell the instance")
	}
	noteAudit(r, map[string]any{"entity": inst.Entity, "instance": inst.ID, "config": c})
	if err := s.opts.Store.SetInstanceConfig(r.Context(), env.ID, inst.ID, c); err != nil {
		return err
	}
	if err := n.InstanceConfigChanged(r.Context(), env, inst.Entity, inst.ID, c); err != nil {
		s.log.WarnContext(r.Context(), "service instance config: the instance not told", "environment", env.Name,
			"service_entity", inst.Entity, "instance", inst.ID, "error", err)
		return Unavailable("the config is stored, but the instance could not be told (the lifecycle engine, " +
			"Temporal, is unavailable); repeat the request")
	}
	WriteJSON(w, http.StatusOK, instanceConfigView(ent, inst, c))
	return nil
}
