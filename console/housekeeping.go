package console

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/auth"
)

// The environment's housekeeping page: protect and lift the protection,
// clear and decommission. What destroys asks for the environment's name
// typed again (the confirmation step, without script); the API decides
// who may (docs/security.md) and the page only offers what the user's
// role allows.

func (c *Console) housekeepingRoutes(r chi.Router) {
	r.Get("/console/env/{env}/housekeeping", c.housekeeping)
	r.Post("/console/env/{env}/housekeeping", c.doHousekeeping)
}

// housekeepingData is the housekeeping page's.
type housekeepingData struct {
	Env client.Environment
	// Admin: the user is the environment's admin; GlobalAdmin: a global
	// one (who alone lifts a protection).
	Admin, GlobalAdmin bool
}

func (c *Console) housekeeping(w http.ResponseWriter, r *http.Request) {
	c.renderHousekeeping(w, r, http.StatusOK, "")
}

func (c *Console) renderHousekeeping(w http.ResponseWriter, r *http.Request, status int, errText string) {
	u, env := userOf(r), chi.URLParam(r, "env")
	e, err := u.api.Environment(r.Context(), env)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	d := housekeepingData{Env: e, Admin: u.may(env, auth.RoleAdmin), GlobalAdmin: u.whoami.Role == auth.RoleAdmin.String()}
	c.render(w, r, status, "housekeeping", page{Title: "Housekeeping of " + e.Name, Env: env, Data: d, Error: errText})
}

func (c *Console) doHousekeeping(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	if !c.form(w, r) {
		return
	}
	action := r.PostFormValue("action")
	back := "/console/env/" + url.PathEscape(env) + "/housekeeping"
	switch action {
	case "protect", "unprotect":
		if err := u.api.Do(r.Context(), http.MethodPost, client.EnvPath(env, action), nil, nil); err != nil {
			c.fail(w, r, err)
			return
		}
		msg := "The environment is protected: clear, decommission and delete are refused until a global admin lifts it."
		if action == "unprotect" {
			msg = "The protection is lifted."
		}
		http.Redirect(w, r, c.flashURL(r, back, msg), http.StatusSeeOther)
	case "clear", "decommission":
		if r.PostFormValue("confirm") != env {
			c.renderHousekeeping(w, r, http.StatusUnprocessableEntity,
				fmt.Sprintf("Nothing was done: type the environment's name, %s, to confirm the %s.", env, action))
			return
		}
		var msg string
		if action == "clear" {
			out, err := u.api.ClearEnvironment(r.Context(), env)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			msg = fmt.Sprintf("Cleared: %d versions, %d resources and %d service instances removed; the settings stay.",
				out.Versions, out.Resources, out.ServiceInstances)
		} else {
			d, err := u.api.DecommissionStep(r.Context(), env)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			msg = decommissionNote(d)
		}
		http.Redirect(w, r, c.flashURL(r, back, msg), http.StatusSeeOther)
	default:
		c.badRequest(w, r, http.StatusUnprocessableEntity, "action must be protect, unprotect, clear or decommission")
	}
}

// decommissionNote says where a decommission stands after a step.
func decommissionNote(d client.Decommission) string {
	switch {
	case d.State == "cleared":
		return "Decommissioned: everything it deployed was removed, and the environment cleared."
	case d.Failed > 0 && !d.Deploying:
		return fmt.Sprintf("Decommission: %d of %d resources removed, %d failed (%v); press Decommission again to retry.",
			d.Purged, d.Resources, d.Failed, d.FailedResources)
	}
	return fmt.Sprintf("Decommission under way (version %d): %d of %d resources removed, %d failed; "+
		"press Decommission again to follow it, and once all are removed it clears the environment.",
		d.Version, d.Purged, d.Resources, d.Failed)
}
