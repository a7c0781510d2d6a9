package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/intendhq/intend/client"
)

// Export a version, release it and wait for its deploy.
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8888")
	c.Token = os.Getenv("INTEND_TOKEN")
	v, err := c.ExportVersion(ctx, "prod", []byte(`{"resources": []}`))
	if err != nil {
		log.Fatal(err)
	}
	rel, err := c.Release(ctx, "prod", v.Version)
	if err != nil {
		log.Fatal(err)
	}
	if rel.Request != nil {
		run, err := c.WaitRequest(ctx, "prod", rel.Request.ID, 10*time.Minute, nil)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("version %d: %d deployed, %d failed\n", v.Version, run.Deployed, run.Failed)
	}
}

// Branch on the problem's type or status, never on its text.
func ExampleProblem() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"type":"urn:intend:problem:not-found","title":"Not found","status":404,`+
			`"detail":"environment \"staging\" not found"}`)
	}))
	defer srv.Close()

	_, err := client.New(srv.URL).Environment(context.Background(), "staging")
	var p *client.Problem
	if errors.As(err, &p) {
		fmt.Println(p.Status, p.Type == client.TypeNotFound, p.Detail)
	}
	fmt.Println(client.IsNotFound(err))
	// Output:
	// 404 true environment "staging" not found
	// true
}

// Create a service instance, then change an attribute from the version
// the create answered.
func ExampleClient_CreateInstance() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8888")
	c.Token = os.Getenv("INTEND_TOKEN")
	inst, err := c.CreateInstance(ctx, "prod", "vm", client.CreateInstanceRequest{
		Attributes: map[string]any{"name": "web", "memory": 4}})
	if client.IsValidation(err) { // 422: the problem names each attribute
		log.Fatal(err)
	} else if err != nil {
		log.Fatal(err)
	}
	inst, err = c.UpdateInstance(ctx, "prod", "vm", "web",
		client.UpdateInstanceRequest{CurrentVersion: inst.Version, Attributes: map[string]any{"memory": 8}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inst.State)
}
