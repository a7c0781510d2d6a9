package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/callbackd"
	"github.com/intendhq/intend/internal/store"
)

// LSM callbacks (/lsm/v1/callbacks): a URL the server POSTs every
// transfer of the environment's service instances to (or those of one
// entity), signed with a secret shown once. Registering one makes the
// server send requests where the caller says: admin only (see
// docs/security.md, "Callbacks").

// Limits of a callback registration.
const (
	maxCallbackURL         = 2048
	maxCallbackDescription = 1024
	// deadEventsShown bounds the dead events GET .../callbacks/{id} lists.
	deadEventsShown = 20
)

// callbackRequest is the body of POST /lsm/v1/callbacks.
type callbackRequest struct {
	URL string `json:"url"`
	// ServiceEntity limits the callback to one entity's instances;
	// absent: every entity of the environment.
	ServiceEntity *string `json:"service_entity"`
	Description   string  `json:"description"`
}

// CreatedCallback is the answer to a registration: the only time the
// secret is shown (client.CreatedCallback).
type CreatedCallback = client.CreatedCallback

// CallbackView is one callback with its newest dead events
// (client.CallbackView).
type CallbackView = client.CallbackView

// newCallbackSecret is 32 random bytes in hex: the HMAC key is this text.
func newCallbackSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}

// CheckCallbackURL checks a callback URL: absolute http or https with a
// host, no user information (credentials belong in no URL the API
// shows; the signature authenticates the server), no fragment, at most
// 2,048 characters, and a host that allowed admits (empty: any).
func CheckCallbackURL(raw string, allowed []string) error {
	if raw == "" {
		return errors.New("is required")
	}
	if len(raw) > maxCallbackURL {
		return errors.New("is longer than 2048 characters")
	}
	if !validText(raw) || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("holds spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return errors.New("must name a host")
	case u.User != nil:
		return errors.New("must not hold a user or password: the signature authenticates intend to the receiver")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return errors.New("must not hold a fragment")
	case !CallbackHostAllowed(u.Hostname(), allowed):
		return errors.New("names a host this server does not send callbacks to (--lsm-callback-hosts)")
	}
	return nil
}

// CallbackHostAllowed reports whether host is one that allowed admits
// (callbackd.HostAllowed: the dispatcher checks every delivery with the
// same rule).
func CallbackHostAllowed(host string, allowed []string) bool {
	return callbackd.HostAllowed(host, allowed)
}

// createCallback registers a callback: 201 with its secret, once.
func (s *Server) createCallback(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	var req callbackRequest
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	var errs []FieldError
	if err := CheckCallbackURL(req.URL, s.opts.CallbackHosts); err != nil {
		errs = append(errs, FieldError{Field: "/url", Detail: err.Error()})
	}
	entity := ""
	if req.ServiceEntity != nil {
		entity = *req.ServiceEntity
		if entity == "" {
			errs = append(errs, FieldError{Field: "/service_entity", Detail: "is empty: leave it out for every entity"})
		} else if _, err := s.opts.Store.GetEntity(r.Context(), e.ID, entity); errors.Is(err, store.ErrNotFound) {
			errs = append(errs, FieldError{Field: "/service_entity", Detail: "is not an entity of the service catalog"})
		} else if err != nil {
			return err
		}
	}
	switch {
	case len(req.Description) > maxCallbackDescription:
		errs = append(errs, FieldError{Field: "/description", Detail: "is longer than 1024 characters"})
	case strings.ContainsFunc(req.Description, func(r rune) bool { return r < ' ' && r != '\n' || r == 0x7f }):
		errs = append(errs, FieldError{Field: "/description", Detail: "holds control characters"})
	}
	if len(errs) > 0 {
		return Validation("the callback is invalid", errs...)
	}
	secret := newCallbackSecret()
	cb, err := s.opts.Store.CreateCallback(r.Context(), e.ID, store.NewCallback{ServiceEntity: entity,
		URL: req.URL, Description: req.Description, Secret: secret, CreatedBy: principal(r).Actor()})
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"callback_id": cb.ID, "url": cb.URL, "service_entity": cb.ServiceEntity})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/lsm/v1/callbacks/"+cb.ID)
	WriteJSON(w, http.StatusCreated, CreatedCallback{Callback: wireCallback(cb), Secret: secret})
	return nil
}

// listCallbacks lists a page of the environment's callbacks, oldest
// first, with their delivery counts, never a secret.
func (s *Server) listCallbacks(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	limit, err := listPage(r)
	if err != nil {
		return err
	}
	after, err := afterKey(r)
	if err != nil {
		return err
	}
	cbs, err := s.opts.Store.ListCallbacksPage(r.Context(), e.ID, after, limit)
	if err != nil {
		return err
	}
	writePage(w, cbs, limit, func(c store.Callback) string { return pageKey(c.CreatedAt, c.ID) }, wireCallback)
	return nil
}

// callbackParam reads {callback}: a callback's id.
func callbackParam(r *http.Request) (string, error) {
	id, err := pathParam(chi.URLParam(r, "callback"))
	if err != nil {
		return "", err
	}
	if !isUUID(id) {
		return "", NotFound("no callback %q: a callback is named by its id", id)
	}
	return id, nil
}

// callbackOf is the environment and the callback id of the path.
func (s *Server) callbackOf(r *http.Request) (store.Environment, string, error) {
	e, err := s.lsmEnv(r)
	if err != nil {
		return e, "", err
	}
	id, err := callbackParam(r)
	return e, id, err
}

// getCallback returns a callback, its delivery counts and its newest
// dead events.
func (s *Server) getCallback(w http.ResponseWriter, r *http.Request) error {
	e, id, err := s.callbackOf(r)
	if err != nil {
		return err
	}
	cb, err := s.opts.Store.GetCallback(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	dead, err := s.opts.Store.CallbackEvents(r.Context(), cb.ID, "dead", deadEventsShown)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, CallbackView{Callback: wireCallback(cb), DeadEvents: wireAll(dead, wireCallbackEvent)})
	return nil
}

// deleteCallback removes a callback and its undelivered events.
func (s *Server) deleteCallback(w http.ResponseWriter, r *http.Request) error {
	e, id, err := s.callbackOf(r)
	if err != nil {
		return err
	}
	cb, err := s.opts.Store.DeleteCallback(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"callback_id": cb.ID, "url": cb.URL})
	WriteJSON(w, http.StatusOK, wireCallback(cb))
	return nil
}
