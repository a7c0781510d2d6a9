package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/intendhq/intend/client"
)

// The output of the REST client commands: tables for people, the server's
// JSON or YAML for scripts (-o, format.go), and errors as the user should read them.

// writeJSON prints v as indented JSON: raw JSON (json.RawMessage) as the
// server sent it, anything else marshalled.
func writeJSON(w io.Writer, v any) error {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		raw = b
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("the server's JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// decodeItems decodes the raw items of a list into T.
func decodeItems[T any](items []json.RawMessage) ([]T, error) {
	out := make([]T, len(items))
	for i, raw := range items {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("decode the server's answer: %w", err)
		}
	}
	return out, nil
}

// listEvery reads every page of the list at path (cursor "after"). With
// -o json or yaml it prints them as one list ({"items": [...]}) and
// returns done; else it returns them decoded, for a table.
func listEvery[T any](ctx context.Context, s *clientSettings, c *client.Client, path string) (items []T, done bool, err error) {
	raw, err := c.List(ctx, path, nil, "after", 0)
	if err != nil {
		return nil, false, err
	}
	if s.structured() {
		if raw == nil {
			raw = []json.RawMessage{}
		}
		return nil, true, s.write(client.List[json.RawMessage]{Items: raw})
	}
	items, err = decodeItems[T](raw)
	return items, false, err
}

// decode decodes the server's raw answer into v.
func decode(raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode the server's answer: %w", err)
	}
	return nil
}

// table is aligned columns under a header row.
type table struct {
	tw *tabwriter.Writer
	// columns, when not 0, is how many cells of a row are shown: the
	// rest are the columns of -o wide (clientSettings.table).
	columns int
}

// newTable starts a table with the given column headers.
func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(headers...)
	return t
}

// row adds a row; an empty cell shows as "-", so that every column keeps
// a value (and `awk` counts fields right).
func (t *table) row(cells ...string) {
	if t.columns > 0 && len(cells) > t.columns {
		cells = cells[:t.columns]
	}
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		// A tab or newline in a value would break the columns.
		c = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		if i > 0 {
			io.WriteString(t.tw, "\t")
		}
		io.WriteString(t.tw, c)
	}
	io.WriteString(t.tw, "\n")
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }

// writeFields prints name/value pairs, the names aligned: the table of one
// object. Pairs are given flat: name, value, name, value, ...
func writeFields(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		v := pairs[i+1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], v)
	}
	return tw.Flush()
}

// timeFormat is how tables show times: local, to the second.
const timeFormat = "2006-01-02 15:04:05"

// shortTime is t in local time, or "" for the zero time.
func shortTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(timeFormat)
}

// shortTimePtr is shortTime of an optional time.
func shortTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return shortTime(*t)
}

// duration is from-to rounded for people, or "" when either is missing.
func duration(from, to *time.Time) string {
	if from == nil || to == nil || from.IsZero() || to.IsZero() {
		return ""
	}
	d := to.Sub(*from)
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// plural is "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// yesNo shows a flag in a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// compactJSON shows a JSON value on one line (a setting, an attribute).
func compactJSON(v any) string {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		raw = b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// describeProblem renders a problem the server answered for people: its
// title, status and detail, then each field error on its own line.
func describeProblem(p *client.Problem) string {
	var b strings.Builder
	title := p.Title
	if title == "" {
		title = p.Type
	}
	fmt.Fprintf(&b, "%s (%d)", title, p.Status)
	if p.Detail != "" {
		b.WriteString(": ")
		b.WriteString(p.Detail)
	}
	for _, fe := range p.Errors {
		field := fe.Field
		if field == "" {
			field = "(the body)"
		}
		fmt.Fprintf(&b, "\n  %s: %s", field, fe.Detail)
	}
	return b.String()
}

// shortHash shows a hash by its first 12 characters, as git shows commits.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
