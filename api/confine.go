package api

import (
	"encoding/json"
	"strconv"

	"github.com/intendhq/intend/internal/intent"
	"github.com/intendhq/intend/internal/store"
)

// maxConfineErrors bounds the field errors of one refused export.
const maxConfineErrors = 20

// refuseConfined is a 422 naming each resource of an export (body,
// decoded as rs) that the environment's confinement refuses (settings
// allowed_paths, allowed_commands and allowed_endpoints), so that its author learns at
// once. It is a courtesy: what holds is store.ConfineBatch, when a batch
// is handed to an executor (the setting may change after the export, and
// versions the server compiles itself are not exported here). An
// undefined resource is checked once a version defines it.
func refuseConfined(e store.Environment, body []byte, rs []intent.Resource) error {
	rules := e.Settings.Confinement()
	if !rules.Confined() {
		return nil
	}
	var errs []FieldError
	var index map[string]int
	for _, r := range rs {
		if r.Undefined {
			continue
		}
		ref := rules.Check(r.ID.Type, r.Attributes)
		if ref == nil {
			continue
		}
		if index == nil {
			index = exportIndex(body)
		}
		field := "/resources"
		if i, ok := index[r.ID.String()]; ok {
			field += "/" + strconv.Itoa(i) + "/attributes/" + ref.Attribute
		}
		errs = append(errs, FieldError{Field: field, Detail: r.ID.String() + ": " + ref.Reason})
		if len(errs) == maxConfineErrors {
			break
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return Validation("the version has resources outside the environment's confinement (settings allowed_paths, "+
		"allowed_commands, allowed_endpoints; only a global admin changes them)", errs...)
}

// exportIndex maps the resource ids of an export to their index in it
// (decoding sorts them).
func exportIndex(body []byte) map[string]int {
	var doc struct {
		Resources []struct {
			ID string `json:"id"`
		} `json:"resources"`
	}
	out := map[string]int{}
	if json.Unmarshal(body, &doc) != nil {
		return out
	}
	for i, r := range doc.Resources {
		out[r.ID] = i
	}
	return out
}
