package api

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/store"
)

// The lifecycle service manager's API (/lsm/v1, /lsm/v2): the environment
// is chosen by the header X-Intend-Environment (an id or a name).

// EnvironmentHeader names the environment of an /lsm request.
const EnvironmentHeader = client.EnvironmentHeader

// lsmEnv resolves the X-Intend-Environment header.
func (s *Server) lsmEnv(r *http.Request) (store.Environment, error) {
	if e, ok := requestEnv(r); ok {
		return e, nil
	}
	ref := r.Header.Get(EnvironmentHeader)
	if ref == "" {
		return store.Environment{}, BadRequest("the %s header is missing: name the environment (its id or name)", EnvironmentHeader)
	}
	return s.opts.Store.GetEnvironment(r.Context(), ref)
}

// listCatalog returns the service entities of the environment's catalog.
func (s *Server) listCatalog(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	es, err := s.opts.Store.ListEntities(r.Context(), e.ID)
	if err != nil {
		return err
	}
	writeList(w, es, wireServiceEntity)
	return nil
}

// lsmEntityParam resolves the environment and reads {entity}, the
// entity's name, of a lifecycle route.
func (s *Server) lsmEntityParam(r *http.Request) (store.Environment, string, error) {
	e, err := s.lsmEnv(r)
	if err != nil {
		return e, "", err
	}
	name, err := pathParam(chi.URLParam(r, "entity"))
	return e, name, err
}

// getCatalogEntity returns one service entity: its attributes with their
// JSON Schema and modifiers, its lifecycle and instance counts per state.
func (s *Server) getCatalogEntity(w http.ResponseWriter, r *http.Request) error {
	e, name, err := s.lsmEntityParam(r)
	if err != nil {
		return err
	}
	ent, err := s.opts.Store.GetEntity(r.Context(), e.ID, name)
	if err != nil {
		return err
	}
	out, err := s.catalogEntity(r.Context(), e.ID, ent)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// instanceRef resolves the {entity} and {id} path parameters to an
// instance: {id} is the instance's id or its identity.
func (s *Server) instanceRef(r *http.Request) (store.Environment, store.ServiceInstance, error) {
	e, entity, err := s.lsmEntityParam(r)
	if err != nil {
		return e, store.ServiceInstance{}, err
	}
	if _, err := s.opts.Store.GetEntity(r.Context(), e.ID, entity); err != nil {
		return e, store.ServiceInstance{}, err
	}
	ref, err := pathParam(chi.URLParam(r, "id"))
	if err != nil {
		return e, store.ServiceInstance{}, err
	}
	inst, err := s.opts.Store.GetInstance(r.Context(), e.ID, entity, ref)
	return e, inst, err
}

// listInventory returns a page of an entity's instances, by id, of one
// state when ?state= is given; ?deleted=true lists the terminated ones.
func (s *Server) listInventory(w http.ResponseWriter, r *http.Request) error {
	e, entity, err := s.lsmEntityParam(r)
	if err != nil {
		return err
	}
	if _, err := s.opts.Store.GetEntity(r.Context(), e.ID, entity); err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	deleted := false
	switch q.Get("deleted") {
	case "", "false":
	case "true":
		deleted = true
	default:
		return InvalidField("?deleted", "want true or false")
	}
	after := q.Get("after")
	if after != "" && !isUUID(after) {
		return InvalidField("?after", "want the id of the last instance of the previous page")
	}
	items, err := s.opts.Store.ListInstances(r.Context(), e.ID, entity, q.Get("state"), deleted, after, limit)
	if err != nil {
		return err
	}
	writePage(w, items, limit, func(i store.ServiceInstance) string { return i.ID }, wireInstance)
	return nil
}

// Deployment counts an instance's resources in the newest version
// (client.Deployment).
type Deployment = client.Deployment

// getInstance returns one instance: its state, version, attribute sets
// and deployment progress.
func (s *Server) getInstance(w http.ResponseWriter, r *http.Request) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	sd, err := s.opts.Store.ResourceSetDeploy(r.Context(), e.ID, instanceSet(inst), time.Time{})
	if err != nil {
		return err
	}
	rs, err := s.opts.Store.ReferencedBy(r.Context(), e.ID, inst.ID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, client.InstanceView{ServiceInstance: wireInstance(inst),
		Deployment: Deployment{Total: sd.Total, Deployed: sd.Deployed, Failed: sd.Failed}, ReferencedBy: referrerViews(rs)})
	return nil
}

// getInstanceLog returns the instance's log, one entry per version,
// newest first.
func (s *Server) getInstanceLog(w http.ResponseWriter, r *http.Request) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 1000, 1, 1000)
	if err != nil {
		return err
	}
	before, err := queryInt(r, "before", 0, 0, math.MaxInt)
	if err != nil {
		return err
	}
	log, err := s.opts.Store.InstanceLogPage(r.Context(), e.ID, inst.ID, int64(before), limit)
	if err != nil {
		return err
	}
	writePage(w, log, limit, func(l store.InstanceLogEntry) string { return strconv.FormatInt(l.Version, 10) },
		wireInstanceLogEntry)
	return nil
}

// instanceSet is the resource set of an instance's resources.
func instanceSet(inst store.ServiceInstance) string { return inst.Entity + "/" + inst.ID }

// getInstanceResources returns the instance's resources in the newest
// version, with their deploy state.
func (s *Server) getInstanceResources(w http.ResponseWriter, r *http.Request) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	rs, err := s.opts.Store.SetResources(r.Context(), e.ID, instanceSet(inst))
	if err != nil {
		return err
	}
	writeList(w, rs, wireResourceState)
	return nil
}

// diagnosis says why an instance was rejected or failed.
type diagnosis = client.Diagnosis

type failedValidation = client.FailedValidation

type resourceDiagnosis = client.ResourceDiagnosis

// diagnoseInstance collects why an instance is where it is: the compile
// errors of its newest failed validation and its resources that failed,
// with their last failed attempt.
func (s *Server) diagnoseInstance(w http.ResponseWriter, r *http.Request) error {
	e, inst, err := s.instanceRef(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	out := diagnosis{ID: inst.ID, State: inst.State, Version: inst.Version, Resources: []resourceDiagnosis{}}
	log, err := s.opts.Store.InstanceLog(ctx, e.ID, inst.ID)
	if err != nil {
		return err
	}
	for _, entry := range log {
		if len(entry.Errors) > 0 {
			out.Validation = &failedValidation{Version: entry.Version, Errors: entry.Errors}
			break
		}
	}
	rs, err := s.opts.Store.SetResources(ctx, e.ID, instanceSet(inst))
	if err != nil {
		return err
	}
	for _, res := range rs {
		if res.Compliance == "compliant" || res.LastResult == "new" {
			continue
		}
		d := resourceDiagnosis{ResourceState: wireResourceState(res)}
		acts, err := s.opts.Store.ListActions(ctx, e.ID, store.ActionFilter{ResourceID: res.ResourceID, Result: "failed", Limit: 1,
			Outputs: outputsFor(r, e)})
		if err != nil {
			return err
		}
		if len(acts) == 1 {
			d.Error, d.Logs = acts[0].Error, acts[0].Logs
		}
		out.Resources = append(out.Resources, d)
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// isUUID reports whether s is a UUID in its canonical text form.
func isUUID(s string) bool { return store.IsUUID(s) }
