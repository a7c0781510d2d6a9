package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/intendhq/intend/internal/lsm"
	"github.com/intendhq/intend/internal/store"
)

// The API's contract is openapi.yaml, kept by hand next to routes.go: see
// docs/architecture.md ("The API's contract") for why, and
// TestSpecMatchesRoutes and apitest.Validating for what keeps it true.

//go:embed openapi.yaml
var specYAML []byte

//go:embed docs.html
var docsHTML []byte

// specOnce parses the embedded document once: a document that does not
// parse is a build defect, which the tests catch.
var specOnce = sync.OnceValues(func() (map[string]any, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(specYAML, &doc); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	return doc, nil
})

// OpenAPI returns the API's OpenAPI 3.1 document as JSON.
func OpenAPI() ([]byte, error) {
	doc, err := specOnce()
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// serveOpenAPI serves GET /api/v1/openapi.json.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	b, err := OpenAPI()
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, mediaTypeJSON, b)
	return nil
}

// serveDocs serves GET /api/docs: a page of our own that fetches the
// document and renders it, with no script or style from elsewhere.
func (s *Server) serveDocs(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	// Not framed by another site (clickjacking): frame-ancestors, and
	// X-Frame-Options for browsers that predate it.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self' 'unsafe-inline'; "+
		"style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(docsHTML)
	return nil
}

// serveLSMOpenAPI serves GET /lsm/v1/openapi.json: the /lsm part of the
// document, plus a create and an update per service entity of the
// environment's catalog whose bodies hold its attributes' JSON Schemas.
func (s *Server) serveLSMOpenAPI(w http.ResponseWriter, r *http.Request) error {
	e, err := s.lsmEnv(r)
	if err != nil {
		return err
	}
	ents, err := s.opts.Store.ListEntities(r.Context(), e.ID)
	if err != nil {
		return err
	}
	doc, err := lsmDocument(e, ents)
	if err != nil {
		return err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, mediaTypeJSON, b)
	return nil
}

// lsmDocument builds the per-environment document on the embedded one,
// parsed once: the maps it changes (the top level, info, paths,
// components and its schemas) are copies, everything else is shared and
// only read.
func lsmDocument(e store.Environment, ents []store.ServiceEntity) (map[string]any, error) {
	base, err := specOnce()
	if err != nil {
		return nil, err
	}
	doc := maps.Clone(base)
	info := maps.Clone(doc["info"].(map[string]any))
	doc["info"] = info
	info["title"] = "intend lifecycle service manager: environment " + e.Name
	info["description"] = "The /lsm routes of intend's API, with the service entities of environment " + e.Name +
		"'s catalog: each has its create and update, whose request bodies hold its attributes' JSON Schemas. " +
		"The whole API is described by /api/v1/openapi.json."
	paths := map[string]any{}
	for p, item := range doc["paths"].(map[string]any) {
		if strings.HasPrefix(p, "/lsm/") {
			paths[p] = item
		}
	}
	doc["paths"] = paths
	components := maps.Clone(doc["components"].(map[string]any))
	doc["components"] = components
	schemas := maps.Clone(components["schemas"].(map[string]any))
	components["schemas"] = schemas
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	for _, ent := range ents {
		create, update, err := entitySchemas(ent)
		if err != nil {
			return nil, err
		}
		id := schemaName(ent.Name)
		schemas[id+"Create"] = create
		schemas[id+"Update"] = update
		ref := func(name string) map[string]any {
			return map[string]any{"$ref": "#/components/schemas/" + name}
		}
		body := func(name string) map[string]any {
			return map[string]any{"required": true, "content": map[string]any{
				"application/json": map[string]any{"schema": ref(name)}}}
		}
		ok := func(status, what string) map[string]any {
			return map[string]any{
				status:    map[string]any{"description": what, "content": map[string]any{"application/json": map[string]any{"schema": ref("Instance")}}},
				"default": map[string]any{"$ref": "#/components/responses/ProblemResponse"},
			}
		}
		params := []any{
			map[string]any{"$ref": "#/components/parameters/LSMEnv"},
			map[string]any{"$ref": "#/components/parameters/IdempotencyKey"},
		}
		ext := func(action string) map[string]any {
			return map[string]any{"x-intend-action": action, "x-intend-role": "operator", "x-intend-scope": "environment"}
		}
		op := func(m map[string]any, kv map[string]any) map[string]any {
			for k, v := range kv {
				m[k] = v
			}
			return m
		}
		paths["/lsm/v1/service_inventory/"+ent.Name] = map[string]any{
			"post": op(ext("lsm.instance.create"), map[string]any{
				"operationId": "create" + id, "tags": []any{ent.Name},
				"summary":     "Create a " + ent.Name + " instance",
				"description": ent.Description, "parameters": params,
				"requestBody": body(id + "Create"), "responses": ok("201", "the instance as the create wrote it"),
			}),
		}
		paths["/lsm/v1/service_inventory/"+ent.Name+"/{id}"] = map[string]any{
			"patch": op(ext("lsm.instance.update"), map[string]any{
				"operationId": "update" + id, "tags": []any{ent.Name},
				"summary":     "Update a " + ent.Name + " instance's attributes (replaced by name)",
				"parameters":  append([]any{map[string]any{"$ref": "#/components/parameters/InstanceRef"}}, params...),
				"requestBody": body(id + "Update"), "responses": ok("200", "the instance"),
			}),
		}
	}
	return doc, nil
}

// entitySchemas are the bodies of an entity's create and update: its
// attributes a request may set (not the read-only ones), each with its
// JSON Schema; the create requires those the model needs a value of.
func entitySchemas(ent store.ServiceEntity) (create, update map[string]any, err error) {
	props := map[string]any{}
	var required []any
	for _, a := range ent.Attributes {
		if a.Modifier == lsm.ReadOnly {
			continue
		}
		sch := map[string]any{}
		if len(a.Schema) > 0 {
			if err := json.Unmarshal(a.Schema, &sch); err != nil {
				return nil, nil, fmt.Errorf("entity %s, attribute %s: schema: %w", ent.Name, a.Name, err)
			}
		}
		desc := a.Description
		if a.Modifier != lsm.ReadWriteAlways {
			desc = strings.TrimSpace(desc + " (" + string(a.Modifier) + ": set on create, not changed by an update)")
		}
		if a.References != "" {
			desc = strings.TrimSpace(desc + " (names a " + a.References + " instance, by id or identity)")
		}
		if desc != "" {
			sch["description"] = desc
		}
		if len(a.Default) > 0 {
			var d any
			if err := json.Unmarshal(a.Default, &d); err == nil {
				sch["default"] = d
			}
		}
		props[a.Name] = sch
		if a.Required {
			required = append(required, a.Name)
		}
	}
	attrs := func(req []any) map[string]any {
		m := map[string]any{"type": "object", "additionalProperties": false, "properties": props}
		if len(req) > 0 {
			m["required"] = req
		}
		return m
	}
	version := map[string]any{"type": []any{"integer", "null"}}
	create = map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"attributes"},
		"properties": map[string]any{
			"attributes":             attrs(required),
			"service_instance_id":    map[string]any{"type": "string", "description": "the new instance's id (default: one the server chooses)"},
			"service_entity_version": map[string]any{"type": []any{"integer", "null"}, "description": "the entity version (default: the latest)"},
		},
	}
	update = map[string]any{
		"type": "object", "additionalProperties": false,
		"properties": map[string]any{
			"attributes":      attrs(nil),
			"current_version": version,
		},
	}
	return create, update, nil
}

// schemaName turns an entity name into a component name: vm_host → VmHost.
func schemaName(entity string) string {
	var b strings.Builder
	up := true
	for _, c := range entity {
		switch {
		case c == '_' || c == '-' || c == '.':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(c)))
			up = false
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}
