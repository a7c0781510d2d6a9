package adapters

import "slices"

// What a Handler that is not Go code in this process needs from the
// contract: an adapter plugin's proxy (internal/pluginhost) receives the
// log lines and the diff the plugin computed as values, and hands them to
// the attempt as if the handler had logged them itself.

// AppendLog adds a line an adapter logged elsewhere (an adapter plugin,
// which logged it into a handler context of its own) to the attempt's
// log, masked of the attempt's secret values as a line logged through
// Debug, Info, Warn or Error is. The line's time is kept (the current
// time when zero); SensitiveOutputs is kept as given, sorted, naming
// only attributes of Attrs.
func (c *Context) AppendLog(l LogLine) {
	if l.Time.IsZero() {
		l.Time = c.now()
	}
	l.Time = l.Time.UTC()
	var sensitive []string
	for _, k := range l.SensitiveOutputs {
		if _, ok := l.Attrs[k]; ok {
			sensitive = append(sensitive, k)
		}
	}
	slices.Sort(sensitive)
	l.SensitiveOutputs = slices.Compact(sensitive)
	if len(l.Attrs) == 0 {
		l.Attrs = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.masked) > 0 {
		l.Message = mask(l.Message, c.masked)
		if l.Attrs != nil {
			attrs := make(map[string]any, len(l.Attrs))
			for k, v := range l.Attrs {
				attrs[k] = maskAny(v, c.masked)
			}
			l.Attrs = attrs
		}
	}
	c.logs = append(c.logs, l)
}

// EngineDiff is the diff the engine computes for a Handler that is not a
// Differ: for an observation that does not exist, every desired attribute
// from nothing; otherwise ComputeDiff of the attributes. A proxy that
// implements Differ for a handler that may not (an adapter plugin
// without the "diff" capability) returns it, so that the engine decides
// as it would without a Differ.
func EngineDiff(desired Resource, observed Observation) Diff {
	if observed.Exists {
		return ComputeDiff(desired.Attributes, observed.Attributes)
	}
	d := make(Diff, len(desired.Attributes))
	for k, v := range desired.Attributes {
		d[k] = Change{From: nil, To: v}
	}
	return d
}
