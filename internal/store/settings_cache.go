package store

import (
	"encoding/json"
	"slices"
	"sync"
)

// decodedSettings memoizes the decoding of an environment's stored
// settings, keyed by their stored JSON: every request on an environment
// reads its row, and decoding the same few hundred bytes with
// encoding/json's reflection was most of that read's cost (issue 28).
// The key is the whole stored text, so a change of settings is a new
// key and is seen at once, on every replica; nothing here can be stale.
var decodedSettings = settingsCache{m: map[string]Settings{}}

// maxCachedSettings bounds the cache: past it the cache starts over
// (an environment per entry, a few hundred bytes each).
const maxCachedSettings = 1024

type settingsCache struct {
	mu sync.Mutex
	m  map[string]Settings
}

// decode returns the settings raw holds over the defaults, as
// json.Unmarshal(raw, &DefaultSettings()) does. What it returns is the
// caller's own: its slices are copies.
func (c *settingsCache) decode(raw []byte) (Settings, error) {
	c.mu.Lock()
	s, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return s.clone(), nil
	}
	s = DefaultSettings()
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, err
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedSettings {
		clear(c.m)
	}
	c.m[string(raw)] = s.clone()
	c.mu.Unlock()
	return s, nil
}

// clone is s with slices of its own.
func (s Settings) clone() Settings {
	s.AutostartAgents = slices.Clone(s.AutostartAgents)
	s.AllowedPaths = slices.Clone(s.AllowedPaths)
	s.AllowedCommands = slices.Clone(s.AllowedCommands)
	s.AllowedEndpoints = slices.Clone(s.AllowedEndpoints)
	s.AllowedPlugins = slices.Clone(s.AllowedPlugins)
	return s
}
