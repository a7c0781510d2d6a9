package lsm

import (
	"fmt"
	"regexp"
)

// Auto transfers switched off per transfer and per instance (issue 31,
// Inmanta's config_name). An auto transfer of a lifecycle may carry a
// config name; the entity's config maps config names to on or off, and
// an instance's config overrides the entity's name by name. Beside the
// names, the entity has one switch for all its auto transfers (off: every
// one is held), and so has each instance. AutoConfig.Takes is the one
// rule: the instance's workflow asks it before it takes an auto transfer,
// and Decide asks it which auto transfer a held instance waits at.

// AutoConfig is what decides whether the engine takes an instance's auto
// transfers by itself. The zero value takes every one.
type AutoConfig struct {
	// Off: the entity's auto transfers are all off (its config's
	// auto_transfers false).
	Off bool `json:"off,omitempty"`
	// InstanceOff: the instance's auto transfers are all off (the
	// instance's config's auto_transfers false).
	InstanceOff bool `json:"instance_off,omitempty"`
	// Entity is the entity's config per config name; a name it lacks is
	// on.
	Entity map[string]bool `json:"entity,omitempty"`
	// Instance is the instance's config per config name: where it names
	// one, it overrides Entity.
	Instance map[string]bool `json:"instance,omitempty"`
}

// Takes reports whether the engine takes the auto transfer t by itself:
// neither the entity nor the instance switched all auto transfers off,
// and t's config name, when it has one, is on: the instance's config for
// the name, else the entity's, else on. Transfers that are not auto are
// never the engine's to take: false.
func (c AutoConfig) Takes(t Transfer) bool {
	if t.Trigger != Auto || c.Off || c.InstanceOff {
		return false
	}
	if t.ConfigName == "" {
		return true
	}
	if on, ok := c.Instance[t.ConfigName]; ok {
		return on
	}
	if on, ok := c.Entity[t.ConfigName]; ok {
		return on
	}
	return true
}

// configName is what a config name may be: a letter, then letters,
// digits, '_', '-' and '.', at most 64 characters (it is a key of the
// configs on the REST API and a CLI argument).
var configName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,63}$`)

// CheckConfigName reports whether name is a valid config name.
func CheckConfigName(name string) error {
	if !configName.MatchString(name) {
		return fmt.Errorf("config name %q: a letter, then at most 63 letters, digits, '_', '-' or '.'", name)
	}
	return nil
}
