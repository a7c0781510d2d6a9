package store

import (
	"encoding/json"
	"reflect"
	"testing"
)

// settingsSamples are stored settings as environments hold them: none
// set, some, every list set, and keys of an older release.
var settingsSamples = []string{
	`{}`,
	`{"auto_deploy": false, "repair_interval": 600}`,
	`{"autostart_agents": ["a", "b"], "allowed_paths": ["/srv"], "allowed_commands": [], "action_log_retention": 3600,
		"allowed_endpoints": ["https://api.example.com/v1"]}`,
	`{"allowed_paths": null, "autostart_agents": [], "no_longer_a_setting": 1}`,
}

// TestSettingsCacheDecodesAsUnmarshal: the cache answers what
// json.Unmarshal over the defaults answers, the first time and from the
// cache, and what a caller does to its copy does not reach the next one.
func TestSettingsCacheDecodesAsUnmarshal(t *testing.T) {
	for _, raw := range settingsSamples {
		want := DefaultSettings()
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			got, err := decodedSettings.decode([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, decode %d: got %+v, want %+v", raw, i, got, want)
			}
			// A caller's changes are its own.
			for _, s := range [][]string{got.AutostartAgents, got.AllowedPaths, got.AllowedCommands, got.AllowedEndpoints} {
				if len(s) > 0 {
					s[0] = "changed by a caller"
				}
			}
		}
	}
	if _, err := decodedSettings.decode([]byte(`{"auto_deploy": "yes"}`)); err == nil {
		t.Fatal("settings of the wrong type decoded")
	}
}

// TestSettingsCloneCopiesEveryReference: a field of Settings that holds
// a reference (a slice, a map, a pointer) must be copied by clone, or
// the cache would hand one backing array to every caller. A new such
// field fails here until clone copies it.
func TestSettingsCloneCopiesEveryReference(t *testing.T) {
	var s Settings
	fill(t, reflect.ValueOf(&s).Elem())
	c := s.clone()
	var walk func(a, b reflect.Value, path string)
	walk = func(a, b reflect.Value, path string) {
		for i := range a.NumField() {
			f := a.Type().Field(i)
			fa, fb := a.Field(i), b.Field(i)
			switch fa.Kind() {
			case reflect.Struct:
				walk(fa, fb, path+f.Name+".")
			case reflect.Slice, reflect.Map, reflect.Pointer:
				if fa.Pointer() == fb.Pointer() {
					t.Errorf("Settings.%s%s: clone shares it with the cached value", path, f.Name)
				}
			}
		}
	}
	walk(reflect.ValueOf(s), reflect.ValueOf(c), "")
}

// fill sets every reference field of the struct v to a non-empty value.
func fill(t *testing.T, v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			fill(t, f)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		case reflect.Map:
			f.Set(reflect.MakeMap(f.Type()))
		case reflect.Pointer:
			f.Set(reflect.New(f.Type().Elem()))
		case reflect.Bool, reflect.Int, reflect.Int64, reflect.String:
		default:
			t.Fatalf("Settings field %s: kind %s; teach clone and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// BenchmarkDecodeSettings: an environment's settings as every request
// read them before (unmarshal) and now (cached).
func BenchmarkDecodeSettings(b *testing.B) {
	raw := []byte(settingsSamples[2])
	b.Run("unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s := DefaultSettings()
			if err := json.Unmarshal(raw, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodedSettings.decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}
