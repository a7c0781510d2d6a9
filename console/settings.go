package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/intendhq/intend/client"
)

// setting is one environment setting on the environment's page: its JSON
// name, its kind (bool, number, list or text), its value as the form
// shows it, and the error refusing what was sent for it.
type setting struct {
	Name, Kind, Value, Error string
	On                       bool
}

// settingsOf lists env's settings, by name, from their JSON.
func settingsOf(s client.Settings) []setting {
	raw, _ := json.Marshal(s)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	out := make([]setting, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		st := setting{Name: name}
		switch v := m[name].(type) {
		case bool:
			st.Kind, st.On = "bool", v
		case float64:
			st.Kind, st.Value = "number", strconv.FormatFloat(v, 'f', -1, 64)
		case []any:
			parts := make([]string, len(v))
			for i, x := range v {
				parts[i] = fmt.Sprint(x)
			}
			st.Kind, st.Value = "list", strings.Join(parts, ", ")
		case nil:
			st.Kind = "list"
		default:
			st.Kind, st.Value = "text", fmt.Sprint(v)
		}
		out = append(out, st)
	}
	return out
}

// settingsForm reads the form: the settings whose value differs from
// cur, as the API takes them, or the errors of those that do not parse.
func settingsForm(r *http.Request, cur []setting) (map[string]any, map[string]string) {
	changed, errs := map[string]any{}, map[string]string{}
	for _, st := range cur {
		// A field the form did not send is left as it is (a checkbox
		// is sent only when checked: its hidden twin says it was shown).
		if _, sent := r.PostForm["s-"+st.Name]; !sent && st.Kind != "bool" {
			continue
		}
		if _, shown := r.PostForm["shown-"+st.Name]; st.Kind == "bool" && !shown {
			continue
		}
		v := strings.TrimSpace(r.PostFormValue("s-" + st.Name))
		switch st.Kind {
		case "bool":
			if on := r.PostFormValue("s-"+st.Name) == "on"; on != st.On {
				changed[st.Name] = on
			}
		case "number":
			if v == st.Value {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				errs[st.Name] = "not a whole number"
				continue
			}
			changed[st.Name] = n
		case "list":
			if v == st.Value {
				continue
			}
			list := []string{}
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					list = append(list, p)
				}
			}
			changed[st.Name] = list
		default:
			if v != st.Value {
				changed[st.Name] = v
			}
		}
	}
	return changed, errs
}

// saveSettings applies an admin's changes to the environment's settings
// (PATCH /api/v1/environments/{env}); refused values are shown next to
// their fields, as typed.
func (c *Console) saveSettings(w http.ResponseWriter, r *http.Request) {
	u, env := userOf(r), chi.URLParam(r, "env")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !c.checkCSRF(r, u.token) {
		c.render(w, r, http.StatusForbidden, "error", page{Title: "Forbidden", Env: env,
			Error: "The form is stale (the server restarted, or you signed in again); go back and save again."})
		return
	}
	var e client.Environment
	if err := u.api.Do(r.Context(), http.MethodGet, "/api/v1/environments/"+url.PathEscape(env), nil, &e); err != nil {
		c.fail(w, r, err)
		return
	}
	cur := settingsOf(e.Settings)
	changed, errs := settingsForm(r, cur)
	if len(errs) == 0 && len(changed) == 0 {
		http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env), "Nothing changed."), http.StatusSeeOther)
		return
	}
	if len(errs) == 0 {
		err := u.api.Do(r.Context(), http.MethodPatch, "/api/v1/environments/"+url.PathEscape(env),
			map[string]any{"settings": changed}, nil)
		var p *client.Problem
		switch {
		case err == nil:
			names := slices.Sorted(maps.Keys(changed))
			http.Redirect(w, r, c.flashURL(r, "/console/env/"+url.PathEscape(env),
				"Settings saved: "+strings.Join(names, ", ")+"."), http.StatusSeeOther)
			return
		case errors.As(err, &p) && len(p.Errors) > 0:
			for _, fe := range p.Errors {
				errs[strings.TrimPrefix(fe.Field, "/settings/")] = fe.Detail
			}
		default:
			c.fail(w, r, err)
			return
		}
	}
	// Show the form again with what was typed and each refusal.
	for i, st := range cur {
		typed := strings.TrimSpace(r.PostFormValue("s-" + st.Name))
		if st.Kind == "bool" {
			cur[i].On = r.PostFormValue("s-"+st.Name) == "on"
		} else {
			cur[i].Value = typed
		}
		cur[i].Error = errs[st.Name]
	}
	c.environmentPage(w, r, http.StatusUnprocessableEntity, cur, "Some settings were refused; see each below.")
}
