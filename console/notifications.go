package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// notificationRoutes are the page of an environment's notifications and
// its buttons (read, clear).
func (c *Console) notificationRoutes(r chi.Router) {
	r.Get("/console/env/{env}/notifications", c.notifications)
	r.Post("/console/env/{env}/notifications/{id}", c.markNotification)
}

// notificationsData is the notifications page's.
type notificationsData struct {
	Items []client.Notification
	Next  string
	// Cleared: the page shows cleared ones too (?cleared=true).
	Cleared bool
}

func (c *Console) notifications(w http.ResponseWriter, r *http.Request) {
	env := chi.URLParam(r, "env")
	cleared := r.URL.Query().Get("cleared") == "true"
	q := url.Values{"limit": {"50"}}
	if after := r.URL.Query().Get("after"); after != "" {
		q.Set("after", after)
	}
	if cleared {
		q.Set("cleared", "true")
	}
	var list listPage[client.Notification]
	if err := userOf(r).api.Do(r.Context(), http.MethodGet, client.EnvPath(env, "notifications")+"?"+q.Encode(), nil, &list); err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "notifications", page{Title: "Notifications of " + env, Env: env,
		Data:   notificationsData{Items: list.Items, Next: list.Next, Cleared: cleared},
		Unread: unreadNotifications(r, userOf(r), env)})
}

// markNotification marks one notification read or cleared (the form's
// mark), then goes back to the list.
func (c *Console) markNotification(w http.ResponseWriter, r *http.Request) {
	u, env, id := userOf(r), chi.URLParam(r, "env"), chi.URLParam(r, "id")
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if !c.checkCSRF(r, u.token) {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Forbidden", Env: env,
			Error: "The form is stale (the server restarted, or you signed in again); go back and press the button again."})
		return
	}
	yes := true
	var marks client.NotificationMarks
	switch r.PostFormValue("mark") {
	case "read":
		marks.Read = &yes
	case "clear":
		marks.Cleared = &yes
	default:
		c.render(w, r, http.StatusUnprocessableEntity, "error", page{Title: "Invalid request", Env: env, Error: "mark must be read or clear"})
		return
	}
	n, err := u.api.MarkNotification(r.Context(), env, id, marks)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	done := "read"
	if marks.Cleared != nil {
		done = "cleared"
	}
	http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env)+"/notifications",
		fmt.Sprintf("Notification %q marked %s.", n.Title, done)), http.StatusSeeOther)
}

// unreadNotifications is the count the header of the environment's page
// and of its notifications' shows: "",
// a number, or "100+"; "" too when the API does not answer (the page
// itself says what is wrong).
func unreadNotifications(r *http.Request, u *user, env string) string {
	var out listPage[client.Notification]
	if err := u.api.Do(r.Context(), http.MethodGet, client.EnvPath(env, "notifications")+"?unread=true&limit=100", nil, &out); err != nil ||
		len(out.Items) == 0 {
		return ""
	}
	if out.Next != "" {
		return "100+"
	}
	return fmt.Sprint(len(out.Items))
}
