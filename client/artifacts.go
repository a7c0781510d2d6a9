package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// HasArtifact tells whether environment env holds the artifact of digest
// ("sha256:<hex>"): HEAD .../artifacts/{digest} (author).
func (c *Client) HasArtifact(ctx context.Context, env, digest string) (bool, error) {
	path := "/api/v1/environments/" + url.PathEscape(env) + "/artifacts/" + url.PathEscape(digest)
	resp, err := c.send(ctx, http.MethodHead, path, nil, 0, "")
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
		return true, nil
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	default:
		return false, fmt.Errorf("HEAD %s: %s", path, resp.Status)
	}
}

// UploadArtifact streams an artifact of size bytes to environment env
// under its digest: PUT .../artifacts/{digest} (author). The server
// checks the digest as it stores the body; an artifact it holds already
// is not stored again.
func (c *Client) UploadArtifact(ctx context.Context, env, digest string, body io.Reader, size int64) (Artifact, error) {
	path := "/api/v1/environments/" + url.PathEscape(env) + "/artifacts/" + url.PathEscape(digest)
	var a Artifact
	resp, err := c.send(ctx, http.MethodPut, path, body, size, "application/octet-stream")
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return a, err
	}
	if resp.StatusCode >= 400 {
		var p Problem
		if json.Unmarshal(data, &p) == nil && p.Type != "" {
			return a, &p
		}
		return a, fmt.Errorf("PUT %s: %s: %s", path, resp.Status, strings.TrimSpace(string(data)))
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("PUT %s: decode response: %w", path, err)
	}
	return a, nil
}

// send sends one request with the client's credentials and headers and
// returns the response, whatever its status.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, size int64, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.ContentLength = size
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, vs := range c.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, c.unreachable(ctx, err)
	}
	return resp, nil
}
