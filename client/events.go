package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// SSEEvent is one server-sent event.
type SSEEvent struct {
	ID   string
	Name string
	Data []byte
}

// Events opens the server-sent event stream at path (after the event
// lastID when it is not "") and calls fn for every event until the server
// ends the stream (nil), ctx ends, the connection breaks, or fn fails (its
// error). A refusal is the server's problem, as Do returns it. The
// client's overall timeout does not apply: a stream lasts.
func (c *Client) Events(ctx context.Context, path, lastID string, fn func(SSEEvent) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	hc := *c.HTTP
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		var p Problem
		if json.Unmarshal(data, &p) == nil && p.Type != "" {
			return &p
		}
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(data)))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev SSEEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if data != nil {
				ev.Data = []byte(strings.Join(data, "\n"))
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev, data = SSEEvent{}, nil
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID = value
		case "event":
			ev.Name = value
		case "data":
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("GET %s: the stream broke: %w", path, err)
	}
	return nil
}
