package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/store"
)

// Notifications (/api/v1/environments/{env}/notifications): what the
// environment's operators should look at (store/notifications.go).
// Reading them is read's, marking them read or cleared operator's (it
// acknowledges, as pausing does, and changes nothing deployed); the
// webhook makes the server send requests where the caller says, so
// setting it is admin's, as registering an LSM callback is, under the
// same URL rules (CheckCallbackURL, --lsm-callback-hosts).

// listNotifications answers GET .../notifications: a page, newest
// first, of those not cleared (?cleared=true: those too; ?unread=true:
// only those neither read nor cleared).
func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
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
	var f store.NotificationFilter
	if f.Unread, err = queryBool(r, "unread"); err != nil {
		return err
	}
	if f.Cleared, err = queryBool(r, "cleared"); err != nil {
		return err
	}
	ns, err := s.opts.Store.ListNotifications(r.Context(), e.ID, f, after, limit)
	if err != nil {
		return err
	}
	writePage(w, ns, limit, func(n store.Notification) string { return pageKey(n.CreatedAt, n.ID) }, wireNotification)
	return nil
}

// notificationParam reads {notification}: a notification's id.
func notificationParam(r *http.Request) (string, error) {
	id, err := pathParam(chi.URLParam(r, "notification"))
	if err != nil {
		return "", err
	}
	if !isUUID(id) {
		return "", NotFound("no notification %q: a notification is named by its id", id)
	}
	return id, nil
}

// getNotification answers GET .../notifications/{notification}.
func (s *Server) getNotification(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	id, err := notificationParam(r)
	if err != nil {
		return err
	}
	n, err := s.opts.Store.GetNotification(r.Context(), e.ID, id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wireNotification(n))
	return nil
}

// markNotification answers PATCH .../notifications/{notification}:
// {"read": true|false, "cleared": true|false}, at least one of them.
func (s *Server) markNotification(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	id, err := notificationParam(r)
	if err != nil {
		return err
	}
	var req client.NotificationMarks
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	if req.Read == nil && req.Cleared == nil {
		return Validation("the marks are invalid", FieldError{Field: "", Detail: "set read, cleared or both (true or false)"})
	}
	n, err := s.opts.Store.MarkNotification(r.Context(), e.ID, id, req.Read, req.Cleared)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"notification_id": n.ID, "read": req.Read, "cleared": req.Cleared})
	WriteJSON(w, http.StatusOK, wireNotification(n))
	return nil
}

// putNotificationWebhook answers PUT .../notifications/webhook: the URL
// the server POSTs each new notification to, signed as LSM callbacks
// are, with a new secret shown in this answer only. A webhook set
// before is replaced: what it had not delivered goes to the new URL,
// signed with the new secret.
func (s *Server) putNotificationWebhook(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	var req client.NotificationWebhook
	if err := Decode(r, &req, s.opts.MaxBodyBytes); err != nil {
		return err
	}
	if err := CheckCallbackURL(req.URL, s.opts.CallbackHosts); err != nil {
		return Validation("the webhook is invalid", FieldError{Field: "/url", Detail: err.Error()})
	}
	secret := newCallbackSecret()
	cb, err := s.opts.Store.SetNotificationWebhook(r.Context(), e.ID, req.URL, secret, principal(r).Actor())
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"callback_id": cb.ID, "url": cb.URL})
	w.Header().Set("Cache-Control", "no-store")
	WriteJSON(w, http.StatusOK, CreatedCallback{Callback: wireCallback(cb), Secret: secret})
	return nil
}

// getNotificationWebhook answers GET .../notifications/webhook: the URL
// and its delivery counts, never the secret; 404 without one.
func (s *Server) getNotificationWebhook(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	cb, err := s.opts.Store.NotificationWebhook(r.Context(), e.ID)
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

// deleteNotificationWebhook answers DELETE .../notifications/webhook:
// nothing more is sent (a delivery under way may still arrive).
func (s *Server) deleteNotificationWebhook(w http.ResponseWriter, r *http.Request) error {
	e, err := s.env(r)
	if err != nil {
		return err
	}
	cb, err := s.opts.Store.DeleteNotificationWebhook(r.Context(), e.ID)
	if err != nil {
		return err
	}
	noteAudit(r, map[string]any{"callback_id": cb.ID, "url": cb.URL})
	WriteJSON(w, http.StatusOK, wireCallback(cb))
	return nil
}

// queryBool reads a boolean parameter: absent or "false" is false,
// "true" true, anything else a 422.
func queryBool(r *http.Request, name string) (bool, error) {
	switch r.URL.Query().Get(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, InvalidField("?"+name, "must be true or false")
}

func wireNotification(n store.Notification) client.Notification { return client.Notification(n) }
