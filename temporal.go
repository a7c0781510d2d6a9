// Package intend holds the project-wide settings that are shared by every
// binary and test: the Temporal dev-server settings of temporal.yaml.
package intend

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"

	"gopkg.in/yaml.v3"
)

//go:embed temporal.yaml
var temporalYAML []byte

// TemporalDev is the content of temporal.yaml: how intend starts a Temporal
// dev server and which namespace and search attributes it expects.
type TemporalDev struct {
	Namespace        string            `yaml:"namespace"`
	IP               string            `yaml:"ip"`
	Port             int               `yaml:"port"`
	UIPort           int               `yaml:"ui_port"`
	SearchAttributes map[string]string `yaml:"search_attributes"`
	LogLevel         string            `yaml:"log_level"`
	DynamicConfig    map[string]any    `yaml:"dynamic_config"`
	// SQLitePragmas are set on the dev server's database (the CLI's
	// --sqlite-pragma PRAGMA=VALUE).
	SQLitePragmas map[string]string `yaml:"sqlite_pragmas"`
}

// TemporalDevConfig parses the embedded temporal.yaml.
func TemporalDevConfig() (TemporalDev, error) {
	var c TemporalDev
	if err := yaml.Unmarshal(temporalYAML, &c); err != nil {
		return c, fmt.Errorf("temporal.yaml: %w", err)
	}
	if c.Namespace == "" {
		return c, fmt.Errorf("temporal.yaml: namespace is empty")
	}
	for name, typ := range c.SearchAttributes {
		switch typ {
		case "Keyword", "Int", "Text", "Bool", "Double", "Datetime", "KeywordList":
		default:
			return c, fmt.Errorf("temporal.yaml: search attribute %s has unknown type %q", name, typ)
		}
	}
	return c, nil
}

// SearchAttributeArgs returns the dev-server flags that register the search
// attributes, in a stable order.
func (c TemporalDev) SearchAttributeArgs() []string {
	return flagPairs("--search-attribute", c.SearchAttributes)
}

// DynamicConfigArgs returns the dev-server flags for dynamic_config, in a
// stable order. Values are passed as JSON literals as the CLI expects.
func (c TemporalDev) DynamicConfigArgs() []string {
	values := make(map[string]string, len(c.DynamicConfig))
	for k, x := range c.DynamicConfig {
		if str, ok := x.(string); ok {
			values[k] = fmt.Sprintf("%q", str)
		} else {
			values[k] = fmt.Sprint(x)
		}
	}
	return flagPairs("--dynamic-config-value", values)
}

// SQLitePragmaArgs returns the dev-server flags for sqlite_pragmas, in a
// stable order.
func (c TemporalDev) SQLitePragmaArgs() []string {
	return flagPairs("--sqlite-pragma", c.SQLitePragmas)
}

// flagPairs is flag KEY=VALUE for each entry of m, by key.
func flagPairs(flag string, m map[string]string) []string {
	var args []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		args = append(args, flag, k+"="+m[k])
	}
	return args
}
