package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/intendhq/intend/client"
)

// TestConcurrentModelUploads: models uploaded at once, each with a service
// entity of its own, leave the catalog of the newest model source
// (GET .../model and GET /lsm/v1/service_catalog agree).
func TestConcurrentModelUploads(t *testing.T) {
	c, _ := startServer(t)
	env := newEnv(t, c, "models", nil)
	ctx := context.Background()
	// At most 4 uploads of an environment run at once (429 beyond).
	const uploads = 3
	byHash := map[string]string{} // model hash → its entity
	models := make([][]byte, uploads)
	for i := range uploads {
		name := fmt.Sprintf("svc%c", 'a'+i)
		packed := modelArchive(t, strings.Replace(catalogModel, "services: vm: #VM", "services: "+name+": #VM", 1))
		byHash[packed.Hash], models[i] = name, packed.Archive
	}
	start := make(chan struct{})
	errs := make([]error, uploads)
	var wg sync.WaitGroup
	for i := range uploads {
		wg.Go(func() {
			<-start
			errs[i] = c.Do(ctx, http.MethodPut, client.EnvPath(env, "model"),
				client.Raw{ContentType: "application/gzip", Body: models[i]}, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
	}
	var newest client.ModelSource
	if err := c.Do(ctx, http.MethodGet, client.EnvPath(env, "model"), nil, &newest); err != nil {
		t.Fatal(err)
	}
	var cat struct {
		Items []client.ServiceEntity `json:"items"`
	}
	if err := lsmGet(t, c, env, "/lsm/v1/service_catalog", &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat.Items) != 1 || cat.Items[0].Name != byHash[newest.Hash] || cat.Items[0].ModelHash != newest.Hash {
		t.Errorf("newest model %s (entity %s), catalog %+v", newest.Hash, byHash[newest.Hash], cat.Items)
	}
}
