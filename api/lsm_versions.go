package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/compiler"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// Entity versions (issue 14, B.5; docs/lsm.md, "Entity versions"): the
// catalog's versions of an entity, creates of an older version, and the
// migration of an instance to a newer one.

// LSMMigrator maps an instance's attributes from one version of its entity
// to a newer one with the model's CUE migrations
// (activities.LSM.MigrateAttributes). A mapping the model refuses is a
// compiler.Errors.
type LSMMigrator interface {
	MigrateAttributes(ctx context.Context, envID, entity string, from, to int, attrs map[string]any) (map[string]any, error)
}

// catalogEntity is GET /lsm/v1/service_catalog/{entity}: the latest
// version's definition at the top level, as before versions, and every
// version the catalog keeps.
func (s *Server) catalogEntity(ctx context.Context, envID string, ent store.ServiceEntity) (client.CatalogEntity, error) {
	vs, err := s.opts.Store.EntityVersions(ctx, envID, ent.Name)
	if err != nil {
		return client.CatalogEntity{}, err
	}
	return client.CatalogEntity{ServiceEntity: wireServiceEntity(ent), LatestVersion: lsm.EntityVersion(ent.Version),
		Versions: wireSlice(vs, wireEntityVersionInfo)}, nil
}

// getEntityVersion is GET /lsm/v1/service_catalog/{entity}/versions/{version}.
func (s *Server) getEntityVersion(w http.ResponseWriter, r *http.Request) error {
	e, name, err := s.lsmEntityParam(r)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(chi.URLParam(r, "version"))
	if err != nil || n < 1 {
		return InvalidField("version", "must be a version number (1, 2, ...)")
	}
	if _, err := s.opts.Store.GetEntity(r.Context(), e.ID, name); err != nil {
		return err
	}
	v, err := s.opts.Store.GetEntityVersion(r.Context(), e.ID, name, n)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireEntityVersionInfo(v))
	return nil
}

// entityVersion resolves the version a create names (nil: the latest)
// into lw's entity, which the workflow starts with. A version the
// catalog does not have is 422.
func (s *Server) entityVersion(r *http.Request, lw *lsmWrite, version *int) error {
	if version == nil || *version == lsm.EntityVersion(lw.entity.Version) {
		lw.entity.Version = lsm.EntityVersion(lw.entity.Version)
		return nil
	}
	v, err := s.opts.Store.GetEntityVersion(r.Context(), lw.env.ID, lw.entity.Name, *version)
	if errors.Is(err, store.ErrNotFound) {
		return InvalidField("/service_entity_version", fmt.Sprintf("%s has no version %d (its latest is %d; GET the catalog entity for its versions)",
			lw.entity.Name, *version, lsm.EntityVersion(lw.entity.Version)))
	}
	if err != nil {
		return err
	}
	lw.entity.Entity = v.Entity
	return nil
}

// migrateInstanceRequest is POST .../service_inventory/{entity}/{id}/migrate.
type migrateInstanceRequest struct {
	// ToVersion is the version to migrate to (default: the latest).
	ToVersion *int `json:"to_version"`
	// CurrentVersion, when given, must be the instance's version (a
	// stale one is 409); without it the migration applies to the
	// instance as it is.
	CurrentVersion *int64 `json:"current_version"`
}

// migrateInstance maps the instance's current set to a newer version with
// the model's migrations and sends it as an update of that version: it
// goes through the lifecycle's validation and deploy like any update.
func (s *Server) migrateInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req migrateInstanceRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	ref, err := pathParam(chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	inst, err := s.opts.Store.GetInstance(r.Context(), lw.env.ID, lw.entity.Name, ref)
	if err != nil {
		return err
	}
	version := inst.Version
	if req.CurrentVersion != nil {
		version = *req.CurrentVersion
	}
	if inst, err = s.writeTarget(r, lw, lsm.OpMigrate, &version); err != nil {
		return err
	}
	to := lsm.EntityVersion(lw.entity.Version)
	if req.ToVersion != nil {
		to = *req.ToVersion
	}
	from := inst.CurrentVersion()
	if to <= from {
		return InvalidField("/to_version", fmt.Sprintf("must be newer than version %d, the instance's", from))
	}
	if err := s.entityVersion(r, &lw, &to); err != nil {
		if p, ok := errors.AsType[*Problem](err); ok && p.Type == TypeInvalidField {
			return InvalidField("/to_version", fmt.Sprintf("%s has no version %d (its latest is %d)", lw.entity.Name, to, lw.entity.Version))
		}
		return err
	}
	if s.opts.LSMMigrate == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	attrs, err := s.opts.LSMMigrate.MigrateAttributes(r.Context(), lw.env.ID, lw.entity.Name, from, to, inst.Current())
	if errs, ok := errors.AsType[compiler.Errors](err); ok {
		return Validation(fmt.Sprintf("the model's migration of %s from version %d to %d failed: %s", inst.ID, from, to, errs.Error()),
			FieldError{Field: "/to_version", Detail: errs.Error()})
	}
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpMigrate, InstanceID: inst.ID, CurrentVersion: inst.Version,
		Attributes: attrs}, http.StatusOK)
}

// migrateEntityRequest is POST /lsm/v1/service_catalog/{entity}/migrate.
type migrateEntityRequest struct {
	FromVersion *int `json:"from_version"`
	ToVersion   *int `json:"to_version"`
}

// migrateEntity migrates every live instance of one version of an entity
// to a newer one: an order (best_effort) of one migrate item per
// instance, run by the orders' workflow (batches, per-item outcomes, a
// crash resumed from PostgreSQL). 201 with the order; GET
// /lsm/v1/orders/{id} follows it. No instance on the version: 422.
func (s *Server) migrateEntity(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req migrateEntityRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	latest := lsm.EntityVersion(lw.entity.Version)
	if req.FromVersion == nil {
		return InvalidField("/from_version", "required: the version whose instances migrate")
	}
	to := latest
	if req.ToVersion != nil {
		to = *req.ToVersion
	}
	from := *req.FromVersion
	if _, err := s.opts.Store.GetEntityVersion(r.Context(), lw.env.ID, lw.entity.Name, from); errors.Is(err, store.ErrNotFound) {
		return InvalidField("/from_version", fmt.Sprintf("%s has no version %d", lw.entity.Name, from))
	} else if err != nil {
		return err
	}
	if _, err := s.opts.Store.GetEntityVersion(r.Context(), lw.env.ID, lw.entity.Name, to); errors.Is(err, store.ErrNotFound) {
		return InvalidField("/to_version", fmt.Sprintf("%s has no version %d (its latest is %d)", lw.entity.Name, to, latest))
	} else if err != nil {
		return err
	}
	if to <= from {
		return InvalidField("/to_version", fmt.Sprintf("must be newer than from_version %d", from))
	}
	refs, err := s.opts.Store.InstancesOfVersion(r.Context(), lw.env.ID, lw.entity.Name, from)
	if err != nil {
		return err
	}
	if len(refs) == 0 {
		return InvalidField("/from_version", fmt.Sprintf("no live instance of %s is of version %d", lw.entity.Name, from))
	}
	if len(refs) > MaxOrderItems {
		return InvalidField("/from_version", fmt.Sprintf("%d instances are of version %d: a migration takes at most %d at once",
			len(refs), from, MaxOrderItems))
	}
	if s.opts.LSM == nil || s.opts.Orders == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	spec, err := json.Marshal(map[string]int{"to_version": to})
	if err != nil {
		return err
	}
	// An item is named by its instance's identity (unique among the
	// live ones) when it makes an item id, else by the instance's id.
	items := make([]store.NewOrderItem, len(refs))
	for i, ref := range refs {
		item := ref.ID
		if ref.Identity != "" && orderItemID.MatchString(ref.Identity) && !store.IsUUID(ref.Identity) {
			item = ref.Identity
		}
		items[i] = store.NewOrderItem{ItemID: item, Operation: lsm.OpMigrate, Entity: lw.entity.Name, InstanceID: ref.ID, Spec: spec}
	}
	o := store.NewOrder{ID: newUUIDv7(time.Now()), Policy: lsm.OrderBestEffort, Status: lsm.OrderPending,
		RequestedBy: principal(r).Actor(), Items: items}
	return s.writeOrder(w, r, &lw, o, func(order store.Order) map[string]any {
		return map[string]any{"entity": lw.entity.Name, "order": order.ID, "from_version": from, "to_version": to,
			"items": order.ItemCount}
	})
}
