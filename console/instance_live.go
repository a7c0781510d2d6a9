package console

import (
	"net/http"

	"github.com/intendhq/intend/client"
)

// instanceLive is what an instance's page follows as it changes.
type instanceLive struct {
	State      string            `json:"state"`
	Version    int64             `json:"version"`
	Deleted    bool              `json:"deleted"`
	Deployment client.Deployment `json:"deployment"`
}

// instanceEvents streams an instance's state, version and deploy progress
// (stream) while its page is open; the page says when the instance moved
// past the version it shows. A deleted instance's stream ends.
func (c *Console) instanceEvents(w http.ResponseWriter, r *http.Request) {
	u, env, entity, id, ok := c.instanceParams(w, r)
	if !ok {
		return
	}
	c.stream(w, r, func(r *http.Request) (any, bool, error) {
		inst, err := u.api.Instance(r.Context(), env, entity, id)
		live := instanceLive{State: inst.State, Version: inst.Version, Deleted: inst.Deleted, Deployment: inst.Deployment}
		return live, inst.Deleted, err
	})
}
