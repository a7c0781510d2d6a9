package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/intendhq/intend/internal/store"
)

// TestSettingLimits: durations and counts have a largest value, so that a
// huge number is refused rather than overflowing into a busy loop.
func TestSettingLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key, value string
		ok         bool
		why        string
	}{
		{"repair_interval", `18446744074`, false, "overflows a time.Duration into a 290 ms loop"},
		{"repair_interval", `31622400`, true, "a year"},
		{"repair_interval", `31622401`, false, "more than a year"},
		{"deploy_interval", `1e300`, false, "not a whole number"},
		{"deploy_interval", `99999999999999999999999`, false, "beyond int64"},
		{"recompile_interval", `31622401`, false, "more than a year"},
		{"agent_timeout", `604800`, true, "a week"},
		{"agent_timeout", `604801`, false, "more than a week"},
		{"keep_versions", `1000001`, false, "more than a million"},
		{"deploy_interval", `0`, true, "off"},
	} {
		_, errs := store.ApplySettings(store.DefaultSettings(), map[string]json.RawMessage{c.key: json.RawMessage(c.value)})
		if (len(errs) == 0) != c.ok {
			t.Errorf("%s = %s (%s): errors %v, want ok=%v", c.key, c.value, c.why, errs, c.ok)
		}
		if !c.ok && len(errs) == 1 && !strings.Contains(errs[0].Reason, "from") {
			t.Errorf("%s = %s: %q does not say the range", c.key, c.value, errs[0].Reason)
		}
	}
}

// TestValidateName: names are short, lower-case, and never shaped like an
// id (paths take either, so such a name could stand for another
// environment's id).
func TestValidateName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		ok   bool
		why  string
	}{
		{"prod", true, "a plain name"},
		{"web-2_eu", true, "dashes, underscores and digits"},
		{"0b5e3b6e-54f4-4d43-9c1d-3a9f2e6c1a77", false, "the form of an id"},
		{"0b5e3b6e-54f4-4d43-9c1d-3a9f2e6c1a7", true, "one digit short of an id"},
		{"Prod", false, "upper case"},
		{"a\x00b", false, "a NUL byte"},
		{"\xff", false, "invalid UTF-8"},
		{strings.Repeat("a", 64), false, "too long"},
		{"", false, "empty"},
	} {
		err := store.ValidateName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateName(%q) (%s) = %v, want ok=%v", c.name, c.why, err, c.ok)
		}
	}
	if err := store.ValidateName(strings.Repeat("x", 10000)); err == nil || len(err.Error()) > 300 {
		t.Errorf("a 10,000-character name: %d-character error, want a short one", len(err.Error()))
	}
}
