package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// What -o/--output asks a REST client command to print, as kubectl's -o:
// a table (the default), the table with more columns, or the server's
// data as JSON or YAML.

// outputFormat is the value of -o.
type outputFormat string

const (
	outputTable outputFormat = "table"
	outputWide  outputFormat = "wide"
	outputJSON  outputFormat = "json"
	outputYAML  outputFormat = "yaml"
)

// outputFormats are the values -o takes, as its help and errors list them.
var outputFormats = []outputFormat{outputTable, outputWide, outputJSON, outputYAML}

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "format" }

// Set takes one of outputFormats; anything else is an error that pflag
// reports as a usage error (exit 2).
func (o *outputFormat) Set(v string) error {
	for _, f := range outputFormats {
		if outputFormat(v) == f {
			*o = f
			return nil
		}
	}
	return fmt.Errorf("want %s", outputFormatList())
}

// outputFormatList is "table, wide, json or yaml".
func outputFormatList() string {
	names := make([]string, len(outputFormats))
	for i, f := range outputFormats {
		names[i] = string(f)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// jsonFlag is --json, kept as a synonym of -o json: it sets the same
// value, so that whichever of the two comes last wins.
type jsonFlag struct{ o *outputFormat }

func (j *jsonFlag) String() string {
	if j.o == nil {
		return "false"
	}
	return strconv.FormatBool(*j.o == outputJSON)
}

// Type is bool, so that --help shows it as a switch.
func (j *jsonFlag) Type() string { return "bool" }

func (j *jsonFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	switch {
	case b:
		*j.o = outputJSON
	case *j.o == outputJSON:
		*j.o = outputTable
	}
	return nil
}

// outputFlags adds -o/--output and --json to f, both setting o.
func outputFlags(f *pflag.FlagSet, o *outputFormat) {
	*o = outputTable
	f.VarP(o, "output", "o", "output format: "+outputFormatList()+
		" (wide: the table with more columns, such as ids and times; json and yaml: the server's data, a list as one array)")
	f.Var(&jsonFlag{o: o}, "json", "the same as -o json: print the server's JSON (a list as one JSON array) instead of a table")
	f.Lookup("json").NoOptDefVal = "true"
}

// outputCompletion completes -o.
var outputCompletion = fixedCompletion("table\ta table (the default)", "wide\tthe table with more columns",
	"json\tthe server's JSON", "yaml\tthe server's data as YAML")

// structured reports whether -o asks for the server's data (json or
// yaml) rather than a table.
func (s *clientSettings) structured() bool {
	return s.output == outputJSON || s.output == outputYAML
}

// wide reports whether -o wide asks for the tables' extra columns.
func (s *clientSettings) wide() bool { return s.output == outputWide }

// write prints v as -o asks, JSON or YAML: raw JSON (json.RawMessage) as
// the server sent it, anything else marshalled.
func (s *clientSettings) write(v any) error { return writeData(s.stdout, s.output, v) }

// writeArray prints items as one array ([] when there are none).
func (s *clientSettings) writeArray(items []json.RawMessage) error {
	if items == nil {
		items = []json.RawMessage{}
	}
	return s.write(items)
}

// table starts a table of columns, followed with -o wide by the columns
// wide. Each row gives the cells of both; without -o wide those of wide
// are left out.
func (s *clientSettings) table(columns []string, wide ...string) *table {
	if !s.wide() {
		t := newTable(s.stdout, columns...)
		t.columns = len(columns)
		return t
	}
	return newTable(s.stdout, append(columns[:len(columns):len(columns)], wide...)...)
}

// writeData prints v in format: YAML for yaml, else indented JSON.
func writeData(w io.Writer, format outputFormat, v any) error {
	if format != outputYAML {
		return writeJSON(w, v)
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		raw = b
	}
	return writeYAML(w, raw)
}

// writeYAML prints JSON as YAML: the same data, objects' keys in the
// order the JSON has them, numbers as the JSON writes them, text of
// several lines as a literal block.
func writeYAML(w io.Writer, raw []byte) error {
	n, err := yamlOfJSON(raw)
	if err != nil {
		return fmt.Errorf("the server's JSON: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// yamlOfJSON converts one JSON value to a YAML node.
func yamlOfJSON(raw []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	n, err := yamlNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one value")
	}
	return n, nil
}

// yamlNode converts the next JSON value of dec.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string)
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key})
			}
			v, err := yamlNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		if len(n.Content) == 0 {
			n.Style = yaml.FlowStyle // {} and []
		}
		return n, nil
	case string:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}
		if strings.Contains(t, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(t), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}
