package resource_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/intendhq/intend/adapters/resource"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		want   resource.ID
		reason string
	}{
		{
			in:     "fs::File[host1,path=/etc/motd]",
			want:   resource.ID{Type: "fs::File", Agent: "host1", Attribute: "path", Value: "/etc/motd"},
			reason: "the common case",
		},
		{
			in:     "std::testing::NullResource[agent-1,name=x],v=7",
			want:   resource.ID{Type: "std::testing::NullResource", Agent: "agent-1", Attribute: "name", Value: "x", Version: 7},
			reason: "nested namespace and a version",
		},
		{
			in:     "fs::File[h,path=a],v=1]",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "a],v=1"},
			reason: "ends with ] so there is no version: the suffix-lookalike belongs to the value",
		},
		{
			in:     "fs::File[h,path=a],v=1],v=2",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "a],v=1", Version: 2},
			reason: "only the last ],v= is the version",
		},
		{
			in:     "fs::File[h,path=a=b,c=[d] e]",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "a=b,c=[d] e"},
			reason: "the value may contain = , [ ] and spaces",
		},
		{
			in:     "fs::File[h,path=]]",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "]"},
			reason: "a value that is just ]",
		},
		{
			in:     "fs::File[h,path= ]",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: " "},
			reason: "a value that is just a space is not empty",
		},
		{
			in:     "_a::b-c::D_1-[h,_x9=1]",
			want:   resource.ID{Type: "_a::b-c::D_1-", Agent: "h", Attribute: "_x9", Value: "1"},
			reason: "segments may start with _ and contain - and digits",
		},
		{
			in:     "fs::file[h,path=x]",
			want:   resource.ID{Type: "fs::file", Agent: "h", Attribute: "path", Value: "x"},
			reason: "a lower-case type name is allowed; capitalisation is only a convention",
		},
		{
			in:     "k8s::Pod[höst.example:8080/x,name=ünïcødé ☃]",
			want:   resource.ID{Type: "k8s::Pod", Agent: "höst.example:8080/x", Attribute: "name", Value: "ünïcødé ☃"},
			reason: "agents and values may be non-ASCII; agents may contain : / .",
		},
		{
			in:     "fs::File[h,path=x],v=9223372036854775807",
			want:   resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "x", Version: math.MaxInt64},
			reason: "the largest version",
		},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := resource.Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q) = %v; want ok (%s)", tt.in, err, tt.reason)
			}
			if got != tt.want {
				t.Errorf("Parse(%q) = %#v; want %#v (%s)", tt.in, got, tt.want, tt.reason)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("String() = %q; want %q (canonical form)", s, tt.in)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() = %v; want nil", err)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		part    string
		message string // the whole Error(), when set
		reason  string
	}{
		{"", resource.PartID, `resource id "": id is empty`, "empty input"},
		{"fs::File[h,path=]", resource.PartValue, `resource id "fs::File[h,path=]": value is empty`, "empty value"},
		{"fsFile[h,p=1]", resource.PartType, `resource id "fsFile[h,p=1]": type "fsFile" must be <namespace>::<Name>`, "a type needs a namespace"},
		{"File[h,p=1]", resource.PartType, "", "a single segment is not a type"},
		{"[h,p=1]", resource.PartType, `resource id "[h,p=1]": type is empty`, "no type at all"},
		{"fs::[h,p=1]", resource.PartType, "", "empty type name"},
		{"::File[h,p=1]", resource.PartType, "", "empty namespace"},
		{"fs::::File[h,p=1]", resource.PartType, "", "empty middle segment"},
		{"fs:::File[h,p=1]", resource.PartType, "", "a segment cannot start with ':'"},
		{"fs:File[h,p=1]", resource.PartType, "", "a single colon is not a separator"},
		{"fs::1File[h,p=1]", resource.PartType, "", "a segment cannot start with a digit"},
		{"fs::-File[h,p=1]", resource.PartType, "", "a segment cannot start with '-'"},
		{"fs::Fi le[h,p=1]", resource.PartType, "", "no space in a type"},
		{"fs::Fïle[h,p=1]", resource.PartType, "", "types are ASCII"},
		{"fs::File [h,p=1]", resource.PartType, "", "no space before ["},
		{"fs::File", resource.PartID, "", "no brackets"},
		{"fs::File]", resource.PartID, `resource id "fs::File]": "[" is missing after the type`, "no opening bracket"},
		{"fs::File[h,p=1", resource.PartID, "", "no closing bracket"},
		{"fs::File[h,p=1] ", resource.PartID, "", "trailing space"},
		{"fs::File[h]", resource.PartID, "", "no attribute"},
		{"fs::File[h=1]", resource.PartID, "", "no comma after the agent"},
		{"fs::File[,p=1]", resource.PartAgent, `resource id "fs::File[,p=1]": agent is empty`, "empty agent"},
		{"fs::File[h x,p=1]", resource.PartAgent, `resource id "fs::File[h x,p=1]": agent "h x" must not contain ' '`, "space in agent"},
		{"fs::File[h\tx,p=1]", resource.PartAgent, "", "tab in agent"},
		{"fs::File[h\u00a0x,p=1]", resource.PartAgent, "", "non-breaking space in agent"},
		{"fs::File[h\u0085x,p=1]", resource.PartAgent, "", "C1 control (NEL) in agent"},
		{"fs::File[h\x7fx,p=1]", resource.PartAgent, "", "DEL in agent"},
		{"fs::File[h[x,p=1]", resource.PartAgent, "", "[ in agent"},
		{"fs::File[h]x,p=1]", resource.PartAgent, "", "] in agent"},
		{"fs::File[a=b,p=1]", resource.PartAgent, "", "= in agent"},
		{"fs::File[h\xff,p=1]", resource.PartAgent, "", "invalid UTF-8 in agent"},
		{"fs::File[h,=1]", resource.PartAttribute, "", "empty attribute"},
		{"fs::File[h,p-x=1]", resource.PartAttribute, "", "no dash in attribute names"},
		{"fs::File[h,9p=1]", resource.PartAttribute, "", "attribute cannot start with a digit"},
		{"fs::File[h,p q=1]", resource.PartAttribute, "", "space in attribute"},
		{"fs::File[h,p]", resource.PartID, "", "no = after the attribute"},
		{"fs::File[h,p=a\nb]", resource.PartValue, `resource id "fs::File[h,p=a\nb]": value "a\nb" must not contain '\n'`, "newline in value"},
		{"fs::File[h,p=a\x00]", resource.PartValue, "", "NUL in value"},
		{"fs::File[h,p=a\u009f]", resource.PartValue, "", "C1 control in value"},
		{"fs::File[h,p=\xc3]", resource.PartValue, "", "truncated UTF-8 in value"},
		{"fs::File[h,p=],v=1", resource.PartValue, "", "empty value with a version"},
		{"fs::File[h,p=1],v=0", resource.PartVersion, "", "version 0 is not positive"},
		{"fs::File[h,p=1],v=07", resource.PartVersion, `resource id "fs::File[h,p=1],v=07": version "07" must be a positive decimal integer without leading zeros`, "leading zero"},
		{"fs::File[h,p=1],v=", resource.PartVersion, "", "empty version"},
		{"fs::File[h,p=1],v=-1", resource.PartVersion, "", "negative version"},
		{"fs::File[h,p=1],v=+1", resource.PartVersion, "", "sign"},
		{"fs::File[h,p=1],v=1e3", resource.PartVersion, "", "exponent"},
		{"fs::File[h,p=1],v=1 ", resource.PartVersion, "", "trailing space after version"},
		{"fs::File[h,p=1],v=9223372036854775808", resource.PartVersion, "", "overflows int64"},
		{"fs::File[h,p=1],v=99999999999999999999", resource.PartVersion, "", "far beyond int64"},
		{"fs::File[h,p=1],V=1", resource.PartID, "", "upper-case V is not the version suffix"},
		{"fs::File[h,p=1], v=1", resource.PartID, "", "space before v"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			id, err := resource.Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) = %#v; want an error (%s)", tt.in, id, tt.reason)
			}
			var pe *resource.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T is not a *ParseError", tt.in, err)
			}
			if pe.Input != tt.in {
				t.Errorf("Input = %q; want %q", pe.Input, tt.in)
			}
			if pe.Part != tt.part {
				t.Errorf("Part = %q; want %q (%s): %v", pe.Part, tt.part, tt.reason, err)
			}
			if tt.message != "" && err.Error() != tt.message {
				t.Errorf("Error() = %q; want %q", err.Error(), tt.message)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("resource id %q: ", tt.in)) {
				t.Errorf("Error() = %q does not quote the input", err.Error())
			}
			if id != (resource.ID{}) {
				t.Errorf("Parse returned %#v with the error; want the zero ID", id)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	ok := resource.ID{Type: "fs::File", Agent: "h", Attribute: "path", Value: "/x"}
	with := func(f func(*resource.ID)) resource.ID { id := ok; f(&id); return id }
	tests := []struct {
		id     resource.ID
		part   string // "" means valid
		reason string
	}{
		{ok, "", "a plain id"},
		{ok.WithVersion(3), "", "with a version"},
		{resource.ID{}, resource.PartType, "the zero ID is invalid"},
		{with(func(id *resource.ID) { id.Version = -1 }), resource.PartVersion, "negative version"},
		{with(func(id *resource.ID) { id.Type = "fs::Fi[le" }), resource.PartType, "[ would break parsing"},
		{with(func(id *resource.ID) { id.Agent = "a,b" }), resource.PartAgent, ", would break parsing"},
		{with(func(id *resource.ID) { id.Attribute = "a=b" }), resource.PartAttribute, "= would break parsing"},
		{with(func(id *resource.ID) { id.Value = "" }), resource.PartValue, "empty value"},
		{with(func(id *resource.ID) { id.Value = "a]" }), "", "a value ending in ] still round-trips"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			t.Parallel()
			err := tt.id.Validate()
			if tt.part == "" {
				if err != nil {
					t.Fatalf("Validate(%#v) = %v; want nil (%s)", tt.id, err, tt.reason)
				}
				back, err := resource.Parse(tt.id.String())
				if err != nil || back != tt.id {
					t.Fatalf("Parse(String()) = %#v, %v; want %#v", back, err, tt.id)
				}
				return
			}
			var pe *resource.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate(%#v) = %v; want a *ParseError (%s)", tt.id, err, tt.reason)
			}
			if pe.Part != tt.part || pe.Input != tt.id.String() {
				t.Errorf("Validate() = %+v; want Part %q, Input %q", pe, tt.part, tt.id.String())
			}
		})
	}
}

func TestAccessors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, namespace, name, without string
		reason                       string
	}{
		{"fs::File[h,path=/x]", "fs", "File", "fs::File[h,path=/x]", "one namespace segment"},
		{"std::testing::NullResource[a,name=x],v=7", "std::testing", "NullResource", "std::testing::NullResource[a,name=x]", "nested namespace, version dropped"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			id := resource.MustParse(tt.in)
			if got := id.Namespace(); got != tt.namespace {
				t.Errorf("Namespace() = %q; want %q (%s)", got, tt.namespace, tt.reason)
			}
			if got := id.Name(); got != tt.name {
				t.Errorf("Name() = %q; want %q (%s)", got, tt.name, tt.reason)
			}
			if got := id.WithoutVersion().String(); got != tt.without {
				t.Errorf("WithoutVersion() = %q; want %q (%s)", got, tt.without, tt.reason)
			}
			if got := id.WithVersion(12).String(); got != tt.without+",v=12" {
				t.Errorf("WithVersion(12) = %q; want %q", got, tt.without+",v=12")
			}
			if got := id.WithVersion(0); got != id.WithoutVersion() {
				t.Errorf("WithVersion(0) = %#v; want WithoutVersion()", got)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		r := recover()
		err, ok := r.(error)
		var pe *resource.ParseError
		if !ok || !errors.As(err, &pe) {
			t.Fatalf("MustParse panicked with %#v; want a *ParseError", r)
		}
	}()
	resource.MustParse("nope")
}

func TestParseDoesNotAllocate(t *testing.T) {
	// Not parallel: AllocsPerRun is disturbed by other goroutines.
	const in = "std::testing::NullResource[agent-1,name=some value],v=7"
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := resource.Parse(in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Parse allocates %v times per call; want 0 (it runs for every resource of every export)", allocs)
	}
}

func FuzzParse(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzParse.
	f.Add("fs::File[host1,path=/etc/motd]")
	f.Add("std::testing::NullResource[agent-1,name=x],v=7")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := resource.Parse(s)
		if err != nil {
			var pe *resource.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T %v is not a *ParseError", s, err, err)
			}
			if pe.Input != s || pe.Part == "" || pe.Reason == "" {
				t.Fatalf("Parse(%q) = %+v; want Input, Part and Reason set", s, pe)
			}
			return
		}
		if got := id.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q; the form must be canonical", s, got)
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("Parse(%q) ok but Validate() = %v", s, err)
		}
		again, err := resource.Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("Parse(String()) = %#v, %v; want %#v", again, err, id)
		}
		if id.Namespace()+"::"+id.Name() != id.Type {
			t.Fatalf("Namespace() %q + Name() %q != Type %q", id.Namespace(), id.Name(), id.Type)
		}
		if id.Version < 0 {
			t.Fatalf("Parse(%q) gave negative version %d", s, id.Version)
		}
	})
}

// FuzzValidate checks the other direction: any ID whose parts pass Validate
// formats to a string that parses back to the same ID.
func FuzzValidate(f *testing.F) {
	f.Add("fs::File", "h", "path", "/x", int64(0))
	f.Add("a::b::C", "h", "n", "a],v=1", int64(3))
	f.Fuzz(func(t *testing.T, typ, agent, attr, value string, version int64) {
		id := resource.ID{Type: typ, Agent: agent, Attribute: attr, Value: value, Version: version}
		if err := id.Validate(); err != nil {
			var pe *resource.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate() error %T is not a *ParseError", err)
			}
			return
		}
		back, err := resource.Parse(id.String())
		if err != nil || back != id {
			t.Fatalf("Parse(%q) = %#v, %v; want %#v", id.String(), back, err, id)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	ids := []string{
		"fs::File[host1,path=/etc/motd]",
		"std::testing::NullResource[agent-1,name=some longer value, with a comma],v=123456",
	}
	for _, in := range ids {
		b.Run(fmt.Sprintf("len=%d", len(in)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := resource.Parse(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkString(b *testing.B) {
	id := resource.MustParse("std::testing::NullResource[agent-1,name=x],v=7")
	b.ReportAllocs()
	for b.Loop() {
		_ = id.String()
	}
}

func ExampleParse() {
	id, err := resource.Parse("std::testing::NullResource[agent-1,name=x],v=7")
	if err != nil {
		panic(err)
	}
	fmt.Println(id.Namespace(), id.Name(), id.Agent, id.Attribute, id.Value, id.Version)
	fmt.Println(id.WithoutVersion())

	_, err = resource.Parse("fs::File[h,path=]")
	var pe *resource.ParseError
	if errors.As(err, &pe) {
		fmt.Println(pe.Part, "|", err)
	}
	// Output:
	// std::testing NullResource agent-1 name x 7
	// std::testing::NullResource[agent-1,name=x]
	// value | resource id "fs::File[h,path=]": value is empty
}
