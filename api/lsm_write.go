package api

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// The inventory's writes (docs/api.md, "Lifecycle service manager"):
// create, update (v1: attributes; v2: dict-path edits), delete and
// set-state. Each is one Update of the instance's workflow, sent through
// the lsm.Engine; the response waits until the transfer is written.

// IdempotencyKeyHeader names the optional key that makes a write safe to
// repeat: the first response is stored for a day and returned again.
const IdempotencyKeyHeader = client.IdempotencyKeyHeader

// lsmWrite is what every write resolves before it is sent.
type lsmWrite struct {
	env    store.Environment
	entity store.ServiceEntity
	body   []byte
	key    string
	hash   []byte
	// scope is the endpoint the key is used on: the method and the path.
	scope string
}

// beginWrite resolves the environment and the entity, reads the body and,
// for a request with an Idempotency-Key, answers a repeat from the stored
// first response (done is then true: nothing else happens).
func (s *Server) beginWrite(w http.ResponseWriter, r *http.Request) (lw lsmWrite, done bool, err error) {
	if lw.env, err = s.lsmEnv(r); err != nil {
		return lw, false, err
	}
	name, err := pathParam(chi.URLParam(r, "entity"))
	if err != nil {
		return lw, false, err
	}
	if lw.entity, err = s.opts.Store.GetEntityDefinition(r.Context(), lw.env.ID, name); err != nil {
		return lw, false, err
	}
	if lw.body, err = ReadBody(r, s.opts.MaxBodyBytes); err != nil {
		return lw, false, err
	}
	done, err = s.replay(w, r, &lw)
	return lw, done, err
}

// replay reads the request's Idempotency-Key into lw (whose env and body
// are set) and answers a repeat from the stored first response (done is
// then true: nothing else happens).
func (s *Server) replay(w http.ResponseWriter, r *http.Request, lw *lsmWrite) (done bool, err error) {
	lw.key = r.Header.Get(IdempotencyKeyHeader)
	if lw.key == "" {
		return false, nil
	}
	if err := checkIdempotencyKey(lw.key); err != nil {
		return false, err
	}
	lw.hash = requestHash(r, lw.body)
	lw.scope = r.Method + " " + r.URL.EscapedPath()
	stored, ok, err := s.opts.Store.LookupRequest(r.Context(), lw.env.ID, lw.scope, lw.key)
	if err != nil || !ok {
		return false, err
	}
	if !bytes.Equal(stored.Hash, lw.hash) {
		return false, keyReused(lw.key)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	writeRaw(w, stored.Status, mediaTypeJSON, stored.Response)
	return true, nil
}

// checkIdempotencyKey accepts 1 to 255 printable ASCII characters.
func checkIdempotencyKey(key string) error {
	if len(key) > 255 {
		return BadRequest("the %s header is longer than 255 characters", IdempotencyKeyHeader)
	}
	for _, c := range []byte(key) {
		if c < 0x20 || c > 0x7e {
			return BadRequest("the %s header may hold printable ASCII characters only", IdempotencyKeyHeader)
		}
	}
	return nil
}

// requestHash identifies a request for its Idempotency-Key: the method,
// the path with its query, and the body.
func requestHash(r *http.Request, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(r.Method))
	h.Write([]byte{0})
	h.Write([]byte(r.URL.RequestURI()))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// keyReused refuses a key that names another request.
func keyReused(key string) *Problem {
	return Validation(fmt.Sprintf("the %s %q was used on this endpoint for another request (another body or query) "+
		"within the last 24 hours; use a new key for a new request", IdempotencyKeyHeader, key))
}

// send sends req and writes the instance as written with status. With an
// Idempotency-Key, the key is the update id and the engine stores the
// response with the transfer; without one, a fresh id is used.
func (s *Server) send(w http.ResponseWriter, r *http.Request, lw lsmWrite, req lsm.Request, status int) error {
	if s.opts.LSM == nil {
		return Unavailable("the lifecycle engine is not running in this server")
	}
	req.Env, req.Entity, req.Actor = lw.env.LSM(), lw.entity.Entity, principal(r).Actor()
	req.AutoTransfersOff = !lw.entity.Config.AutoTransfers
	req.AutoTransferConfigs = lw.entity.Config.AutoTransferConfigs
	noteAudit(r, map[string]any{"entity": lw.entity.Name, "instance": req.InstanceID, "op": req.Op})
	if lw.key != "" {
		// The instance's workflow takes an update id once: the key with
		// its endpoint, so that one key on two endpoints is two requests.
		req.UpdateID = lw.key + " " + lw.scope
		req.Idempotent = &lsm.IdempotentRequest{Scope: lw.scope, Key: lw.key, Hash: lw.hash, Status: status}
	} else {
		req.UpdateID = newUUID()
	}
	inst, err := s.opts.LSM.Send(r.Context(), req)
	if err != nil {
		return s.engineProblem(w, r, req, err)
	}
	if lw.key != "" {
		// Temporal applies an update id once: a concurrent request with
		// the same key but another body got the first one's result.
		stored, ok, err := s.opts.Store.LookupRequest(r.Context(), lw.env.ID, lw.scope, lw.key)
		if err != nil {
			return err
		}
		if ok && !bytes.Equal(stored.Hash, lw.hash) {
			return keyReused(lw.key)
		}
	}
	WriteJSON(w, status, wireInstance(inst))
	return nil
}

// engineProblem maps what the engine returned to a problem.
func (s *Server) engineProblem(w http.ResponseWriter, r *http.Request, req lsm.Request, err error) error {
	var rej *lsm.Rejection
	switch {
	case errors.As(err, &rej):
		return rejectionProblem(w, req, rej)
	case errors.Is(err, lsm.ErrPending):
		return Unavailable("the request was accepted and is still being applied; repeat it with the same " +
			IdempotencyKeyHeader + " to get its response, or GET the instance")
	case errors.Is(err, lsm.ErrUnavailable):
		s.log.WarnContext(r.Context(), "lifecycle engine unavailable", "environment", req.Env.Name, "service_entity", req.Entity.Name,
			"service_instance", req.InstanceID, "error", err)
		return Unavailable("the lifecycle engine (Temporal) is unavailable; try again later, with the same " +
			IdempotencyKeyHeader + " if the request had one (Temporal may still apply it)")
	}
	return err
}

// rejectionProblem maps a rejection: 409 for stale, illegal, busy,
// exists and conflict; 422 for invalid attributes; 404 for an instance
// whose create was not applied.
func rejectionProblem(w http.ResponseWriter, req lsm.Request, rej *lsm.Rejection) error {
	switch rej.Reason {
	case lsm.RejectStale:
		p := Conflict("service instance %s is at version %d, not %d: GET it and make the change against version %d",
			req.InstanceID, rej.Version, req.CurrentVersion, rej.Version)
		p.Errors = []FieldError{{Field: "/current_version", Detail: "the current version is " + strconv.FormatInt(rej.Version, 10)}}
		return p
	case lsm.RejectIllegal:
		if req.Op == lsm.OpCreate {
			return initialStateProblem(req, rej.Allowed)
		}
		return illegalProblem(req, rej.State, rej.Allowed)
	case lsm.RejectInvalid:
		return Validation(rej.Message, attributeErrors("/attributes/", rej.Problems)...)
	case lsm.RejectBusy:
		w.Header().Set("Retry-After", "1")
		return Conflict("%s", rej.Message)
	case lsm.RejectExists, lsm.RejectConflict:
		return Conflict("%s", rej.Message)
	case lsm.RejectNotCreated:
		return NotFound("%s", rej.Message)
	case lsm.RejectReferenced:
		return referencedProblem(req, rej)
	}
	return rej
}

// illegalProblem is the 409 of a request the state has no transfer for:
// errors lists, one per entry, what the state allows and the request
// that sends it.
func illegalProblem(req lsm.Request, state string, allowed []lsm.Event) *Problem {
	what := map[string]string{lsm.OpUpdate: "update (on_update)", lsm.OpDelete: "delete (on_delete)",
		lsm.OpSetState: fmt.Sprintf("transfer to %q (api)", req.Target)}[req.Op]
	names := make([]string, len(allowed))
	for i, ev := range allowed {
		names[i] = ev.String()
	}
	list := "nothing"
	if len(names) > 0 {
		list = strings.Join(names, ", ")
	}
	field := ""
	if req.Op == lsm.OpSetState {
		field = "/target_state"
	}
	p := Conflict("service instance %s is in state %q, which allows no %s; it allows %s", req.InstanceID, state, what, list)
	p.Errors = []FieldError{{Field: field, Detail: fmt.Sprintf("state %q allows no %s", state, what)}}
	for _, ev := range allowed {
		p.Errors = append(p.Errors, FieldError{Field: "", Detail: allowedDetail(ev)})
	}
	return p
}

// initialStateProblem is the 422 of a create naming an initial state its
// lifecycle does not allow: a property of the entity, not of an
// instance's state (which is a set-state's 409), so the request is
// invalid as it stands. Errors list the states a create may begin in.
func initialStateProblem(req lsm.Request, allowed []lsm.Event) *Problem {
	initial := make([]string, len(allowed))
	for i, ev := range allowed {
		initial[i] = ev.Target
	}
	p := Validation(fmt.Sprintf("the lifecycle of %s allows no create in state %q", req.Entity.Name, req.Target))
	for _, d := range lsm.InitialStateDetails(req.Target, initial) {
		p.Errors = append(p.Errors, FieldError{Field: "/initial_state", Detail: d})
	}
	return p
}

// allowedDetail names an allowed event and the request that sends it.
func allowedDetail(ev lsm.Event) string {
	switch ev.Trigger {
	case lsm.API:
		return fmt.Sprintf("allowed: %s (POST .../state with target_state %q)", ev, ev.Target)
	case lsm.OnUpdate:
		return "allowed: on_update (PATCH the instance)"
	case lsm.OnDelete:
		return "allowed: on_delete (DELETE the instance)"
	}
	return fmt.Sprintf("allowed: %s (taken by the server)", ev)
}

// attributeErrors are the field errors of attribute problems, each at
// prefix and the attribute's name, or, inside an embedded entity, at
// prefix and the value's pointer (/attributes/interfaces/0/mtu).
func attributeErrors(prefix string, problems []lsm.AttributeProblem) []FieldError {
	errs := make([]FieldError, 0, len(problems))
	for _, pr := range problems {
		errs = append(errs, FieldError{Field: pr.FieldUnder(prefix), Detail: pr.String()})
	}
	return errs
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// keyedUUID derives an instance id from a create's Idempotency-Key
// (version 8, name-based on SHA-256), so that a repeat of a create still
// in flight reaches the same instance and workflow.
func keyedUUID(envID, entity, key string) string {
	sum := sha256.Sum256([]byte("intend lsm create\x00" + envID + "\x00" + entity + "\x00" + key))
	var b [16]byte
	copy(b[:], sum[:16])
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// createInstanceRequest is POST /lsm/v1/service_inventory/{entity}.
type createInstanceRequest struct {
	Attributes        map[string]any `json:"attributes"`
	ServiceInstanceID string         `json:"service_instance_id"`
	// ServiceEntityVersion is the entity version the instance is of
	// (default: the latest).
	ServiceEntityVersion *int `json:"service_entity_version"`
	// InitialState is the state the instance begins in: one of its
	// lifecycle's initial states (default: its start state).
	InitialState string `json:"initial_state"`
}

// prepareCreate resolves what a create (or its dry-run) names: the new
// instance's id (the client's UUID, one derived from the Idempotency-Key,
// or a fresh one), the entity version, the references, and that the id
// was never used. req.Attributes is nil no more.
func (s *Server) prepareCreate(r *http.Request, lw *lsmWrite, req *createInstanceRequest) (string, error) {
	id := strings.ToLower(req.ServiceInstanceID)
	switch {
	case id != "" && !isUUID(id):
		return "", InvalidField("/service_instance_id", "must be a UUID")
	case id == "" && lw.key != "":
		id = keyedUUID(lw.env.ID, lw.entity.Name, lw.key)
	case id == "":
		id = newUUID()
	}
	if req.Attributes == nil {
		req.Attributes = map[string]any{}
	}
	if err := s.entityVersion(r, lw, req.ServiceEntityVersion); err != nil {
		return "", err
	}
	if err := s.checkReferences(r.Context(), lw.env.ID, lw.entity.Attributes, req.Attributes, "/attributes/"); err != nil {
		return "", err
	}
	// An id that was created before (even terminated) is taken: its
	// workflow may have ended, and a new one must not take it over.
	if _, err := s.opts.Store.GetInstance(r.Context(), lw.env.ID, "", id); err == nil {
		return "", Conflict("service instance %s exists", id)
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return id, nil
}

// createInstance creates an instance: 201 with the instance as the
// create wrote it (version 1, the lifecycle's start state or the
// initial_state the request named).
func (s *Server) createInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req createInstanceRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	id, err := s.prepareCreate(r, &lw, &req)
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpCreate, InstanceID: id, Attributes: req.Attributes, Target: req.InitialState},
		http.StatusCreated)
}

// writeTarget resolves {id} for a write after the create: the instance,
// which must be live, and the current_version the client named, which
// must be its version (the workflow checks again).
func (s *Server) writeTarget(r *http.Request, lw lsmWrite, op string, version *int64) (store.ServiceInstance, error) {
	if version == nil {
		return store.ServiceInstance{}, InvalidField("/current_version",
			"required: the instance's version as GET shows it (version)")
	}
	ref, err := pathParam(chi.URLParam(r, "id"))
	if err != nil {
		return store.ServiceInstance{}, err
	}
	inst, err := s.opts.Store.GetInstance(r.Context(), lw.env.ID, lw.entity.Name, ref)
	if err != nil {
		return inst, err
	}
	if inst.Deleted {
		return inst, Conflict("service instance %s is %s: it takes no more requests", inst.ID, inst.State)
	}
	if inst.Version != *version {
		return inst, rejectionProblem(nil, lsm.Request{Op: op, InstanceID: inst.ID, CurrentVersion: *version},
			&lsm.Rejection{Reason: lsm.RejectStale, Version: inst.Version})
	}
	return inst, nil
}

// updateInstanceRequest is PATCH /lsm/v1/service_inventory/{entity}/{id}.
type updateInstanceRequest struct {
	CurrentVersion *int64         `json:"current_version"`
	Attributes     map[string]any `json:"attributes"`
}

// updateInstance (v1) replaces the given attributes in the instance's
// current set and sends the result as the update.
func (s *Server) updateInstance(w http.ResponseWriter, r *http.Request) error {
	return s.updateAttributes(w, r, false)
}

// replaceInstance (PUT v1) sends the client's whole set as the update:
// the attributes it leaves out are removed (those with a default get it,
// as at a create) and the server's r attributes keep their values
// (lsm.ReplaceAttributes). The instance's workflow judges the result as
// it judges a PATCH's (lsm.CheckUpdate): an rw attribute that differs
// is refused.
func (s *Server) replaceInstance(w http.ResponseWriter, r *http.Request) error {
	return s.updateAttributes(w, r, true)
}

// updateAttributes is the v1 update, PATCH (merge) or PUT (replace).
func (s *Server) updateAttributes(w http.ResponseWriter, r *http.Request, replace bool) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req updateInstanceRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	switch {
	case req.Attributes == nil && replace:
		return InvalidField("/attributes", "required: the instance's whole new set of attributes, by name")
	case len(req.Attributes) == 0 && !replace:
		return InvalidField("/attributes", "required: the attributes to change, by name")
	}
	inst, err := s.writeTarget(r, lw, lsm.OpUpdate, req.CurrentVersion)
	if err != nil {
		return err
	}
	next, refs := lsm.MergeAttributes(inst.Current(), req.Attributes), req.Attributes
	if replace {
		specs, err := s.attributesOf(r, lw, inst.CurrentVersion())
		if err != nil {
			return err
		}
		next = lsm.ReplaceAttributes(specs, inst.Current(), req.Attributes)
		refs = lsm.ChangedAttributes(inst.Current(), next)
	}
	if err := s.checkReferences(r.Context(), lw.env.ID, lw.entity.Attributes, refs, "/attributes/"); err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpUpdate, InstanceID: inst.ID, CurrentVersion: inst.Version,
		Attributes: next}, http.StatusOK)
}

// attributesOf are the attributes of version of lw's entity (the
// version an instance's current set is of).
func (s *Server) attributesOf(r *http.Request, lw lsmWrite, version int) ([]lsm.AttributeSpec, error) {
	if version == lsm.EntityVersion(lw.entity.Version) {
		return lw.entity.Attributes, nil
	}
	v, err := s.opts.Store.GetEntityVersion(r.Context(), lw.env.ID, lw.entity.Name, version)
	if err != nil {
		return nil, err
	}
	return v.Attributes, nil
}

// instanceEdit is one edit of PATCH /lsm/v2/....
type instanceEdit = lsm.Edit

// editInstanceRequest is PATCH /lsm/v2/service_inventory/{entity}/{id}.
type editInstanceRequest struct {
	CurrentVersion *int64         `json:"current_version"`
	Edit           []instanceEdit `json:"edit"`
}

// editInstance (v2) applies the edits in order to a copy of the
// instance's current set and sends the result as the update.
func (s *Server) editInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req editInstanceRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	if len(req.Edit) == 0 {
		return InvalidField("/edit", "required: at least one edit")
	}
	inst, err := s.writeTarget(r, lw, lsm.OpUpdate, req.CurrentVersion)
	if err != nil {
		return err
	}
	next, err := applyEdits(inst.Current(), req.Edit)
	if err != nil {
		return err
	}
	if err := s.checkReferences(r.Context(), lw.env.ID, lw.entity.Attributes, lsm.ChangedAttributes(inst.Current(), next), "/attributes/"); err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpUpdate, InstanceID: inst.ID, CurrentVersion: inst.Version,
		Attributes: next}, http.StatusOK)
}

// applyEdits applies edits in order to attrs (not modified); a faulty
// edit is a 422 naming its index (and edit_id) and target.
func applyEdits(attrs map[string]any, edits []instanceEdit) (map[string]any, error) {
	next, err := lsm.ApplyEdits(attrs, edits)
	return next, editProblem("/edit", err)
}

// editProblem is the 422 of an *lsm.EditError, its fields under at (the
// edit list's pointer); other errors pass.
func editProblem(at string, err error) error {
	var ee *lsm.EditError
	if !errors.As(err, &ee) {
		return err
	}
	field := at
	if ee.Index >= 0 {
		field = at + "/" + strconv.Itoa(ee.Index) + ee.Field
	}
	if ee.Message != "" {
		return Validation(ee.Message, FieldError{Field: field, Detail: ee.Detail})
	}
	return InvalidField(field, ee.Detail)
}

// deleteInstanceRequest is the optional body of DELETE.
type deleteInstanceRequest struct {
	CurrentVersion *int64 `json:"current_version"`
}

// deleteInstance takes the on_delete transfer: 200 with the instance as
// written (its resources are removed next).
func (s *Server) deleteInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req deleteInstanceRequest
	if len(bytes.TrimSpace(lw.body)) > 0 {
		if err := decodeJSON(lw.body, &req); err != nil {
			return err
		}
	}
	if v := r.URL.Query().Get("current_version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return InvalidField("?current_version", "must be a version (a positive whole number)")
		}
		if req.CurrentVersion != nil && *req.CurrentVersion != n {
			return InvalidField("?current_version", "differs from current_version in the body")
		}
		req.CurrentVersion = &n
	}
	if req.CurrentVersion == nil {
		return InvalidField("?current_version", "required: the instance's version as GET shows it (version)")
	}
	inst, err := s.writeTarget(r, lw, lsm.OpDelete, req.CurrentVersion)
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpDelete, InstanceID: inst.ID, CurrentVersion: inst.Version}, http.StatusOK)
}

// setStateRequest is POST /lsm/v1/services/{entity}/{id}/state.
type setStateRequest struct {
	CurrentVersion *int64 `json:"current_version"`
	TargetState    string `json:"target_state"`
}

// setInstanceState takes the api transfer to target_state: 200 with the
// instance as written.
func (s *Server) setInstanceState(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req setStateRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	if req.TargetState == "" {
		return InvalidField("/target_state", "required: the state to go to")
	}
	inst, err := s.writeTarget(r, lw, lsm.OpSetState, req.CurrentVersion)
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpSetState, InstanceID: inst.ID, CurrentVersion: inst.Version,
		Target: req.TargetState}, http.StatusOK)
}

// rollbackRequest is POST /lsm/v1/service_inventory/{entity}/{id}/rollback.
type rollbackRequest struct {
	CurrentVersion *int64 `json:"current_version"`
	// ToVersion is the instance version whose attributes to restore.
	ToVersion *int64 `json:"to_version"`
}

// rollbackInstance restores the attributes an instance had at an earlier
// version (its active set then; its candidate set when it had no active
// one) as an update: through the lifecycle's validation and deploy, and
// refused (409) in a state that takes no update. Only the attributes a
// client may change (rw+) are restored; the others cannot have changed.
func (s *Server) rollbackInstance(w http.ResponseWriter, r *http.Request) error {
	lw, done, err := s.beginWrite(w, r)
	if err != nil || done {
		return err
	}
	var req rollbackRequest
	if err := decodeJSON(lw.body, &req); err != nil {
		return err
	}
	if req.ToVersion == nil || *req.ToVersion < 1 {
		return InvalidField("/to_version", "required: the instance version whose attributes to restore (a positive whole number)")
	}
	inst, err := s.writeTarget(r, lw, lsm.OpUpdate, req.CurrentVersion)
	if err != nil {
		return err
	}
	next, err := s.rolledBack(r, lw.env.ID, lw.entity.Attributes, inst, *req.ToVersion)
	if err != nil {
		return err
	}
	return s.send(w, r, lw, lsm.Request{Op: lsm.OpUpdate, InstanceID: inst.ID, CurrentVersion: inst.Version,
		Attributes: next}, http.StatusOK)
}

// rolledBack is the set a rollback of inst to version to sends as its
// update (a rollback and its dry-run alike).
func (s *Server) rolledBack(r *http.Request, envID string, specs []lsm.AttributeSpec, inst store.ServiceInstance, to int64) (map[string]any, error) {
	if to >= inst.Version {
		return nil, InvalidField("/to_version", fmt.Sprintf("must be a version before the current one (%d)", inst.Version))
	}
	log, err := s.opts.Store.InstanceLogPage(r.Context(), envID, inst.ID, to+1, 1)
	if err != nil {
		return nil, err
	}
	if len(log) == 0 || log[0].Version != to {
		return nil, InvalidField("/to_version", fmt.Sprintf("the instance's log has no version %d", to))
	}
	then := log[0].Active
	if len(then) == 0 {
		then = log[0].Candidate
	}
	if len(then) == 0 {
		return nil, InvalidField("/to_version", fmt.Sprintf("version %d holds no attributes to restore", to))
	}
	return lsm.RestoreAttributes(specs, inst.Current(), then), nil
}
