package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	intend "github.com/intendhq/intend"
)

// attributeGuard is a client interceptor that registers intend's search
// attributes again when Temporal refuses a workflow start that carries
// them: after Temporal lost its store and the namespace was created again
// (docs/operations.md, "Backup and restore") the namespace has none, and
// every start (an environment's scheduler, a deploy's wake-up, a service
// instance restarted from PostgreSQL) was refused until each server
// restarted. The refusal is an InvalidArgument ("no mapping defined for
// search attribute ...") or, while the namespace is being created again,
// a NamespaceNotFound; the guard does not read the message: it registers
// what is missing, waits until the frontend accepts every attribute, and
// tries the start once more. A start refused for another reason is
// refused again, at the cost of two cheap calls.
type attributeGuard struct {
	interceptor.ClientInterceptorBase
	namespace string
	log       *slog.Logger
	// usableWait bounds the wait for the frontend's namespace cache
	// (refreshed every 10 s) to take attributes just added.
	usableWait time.Duration

	mu     sync.Mutex // one registration at a time
	client client.Client
}

func newAttributeGuard(namespace string, log *slog.Logger) *attributeGuard {
	return &attributeGuard{namespace: namespace, log: log, usableWait: 30 * time.Second}
}

// setClient gives the guard the client it intercepts (known once dialled).
func (g *attributeGuard) setClient(c client.Client) {
	g.mu.Lock()
	g.client = c
	g.mu.Unlock()
}

// InterceptClient implements interceptor.ClientInterceptor.
func (g *attributeGuard) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &guardedClient{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, g: g}
}

type guardedClient struct {
	interceptor.ClientOutboundInterceptorBase
	g *attributeGuard
}

func (c *guardedClient) ExecuteWorkflow(ctx context.Context, in *interceptor.ClientExecuteWorkflowInput) (client.WorkflowRun, error) {
	run, err := c.Next.ExecuteWorkflow(ctx, in)
	if err != nil && c.g.restored(ctx, in.Options, err) {
		return c.Next.ExecuteWorkflow(ctx, in)
	}
	return run, err
}

func (c *guardedClient) SignalWithStartWorkflow(ctx context.Context, in *interceptor.ClientSignalWithStartWorkflowInput) (client.WorkflowRun, error) {
	run, err := c.Next.SignalWithStartWorkflow(ctx, in)
	if err != nil && c.g.restored(ctx, in.Options, err) {
		return c.Next.SignalWithStartWorkflow(ctx, in)
	}
	return run, err
}

// UpdateWithStartWorkflow cannot be sent again (its start operation runs
// once): once the attributes are back, the refusal becomes Unavailable,
// which the lifecycle API answers with 503, and the client's retry (same
// Idempotency-Key) goes through.
func (c *guardedClient) UpdateWithStartWorkflow(ctx context.Context, in *interceptor.ClientUpdateWithStartWorkflowInput) (client.WorkflowUpdateHandle, error) {
	h, err := c.Next.UpdateWithStartWorkflow(ctx, in)
	if err != nil && c.g.restored(ctx, nil, err) {
		return h, fmt.Errorf("%w (%w)", serviceerror.NewUnavailable("intend's search attributes were registered again; try again"), err)
	}
	return h, err
}

// restored says whether err, the refusal of a start with options o (nil:
// unknown), may be for want of intend's search attributes, and they are
// now registered and usable: the start is worth sending once more.
func (g *attributeGuard) restored(ctx context.Context, o *client.StartWorkflowOptions, err error) bool {
	var ia *serviceerror.InvalidArgument
	var nf *serviceerror.NamespaceNotFound
	switch {
	case errors.As(err, &nf):
	case errors.As(err, &ia) && (o == nil || o.TypedSearchAttributes.Size() > 0):
	default:
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.client == nil {
		return false
	}
	added, aerr := ensureSearchAttributes(ctx, g.client, g.namespace)
	if aerr != nil {
		g.log.Warn("a workflow start was refused, and intend's search attributes cannot be registered",
			"namespace", g.namespace, "error", aerr, "refusal", err)
		return false
	}
	if len(added) > 0 {
		g.log.Warn("search attributes were missing from the namespace (Temporal lost its store?): registered again",
			"namespace", g.namespace, "search_attributes", added)
	}
	if uerr := g.waitUsable(ctx); uerr != nil {
		g.log.Warn("search attributes registered, not usable yet", "namespace", g.namespace, "error", uerr)
		return false
	}
	return true
}

// waitUsable waits until the frontend accepts a visibility query naming
// every search attribute (it checks requests against its namespace
// cache, refreshed every 10 s; listing the attributes reads the database
// and is no proof), at most usableWait.
func (g *attributeGuard) waitUsable(ctx context.Context) error {
	cfg, err := intend.TemporalDevConfig()
	if err != nil {
		return err
	}
	terms := make([]string, 0, len(cfg.SearchAttributes))
	for _, name := range slices.Sorted(maps.Keys(cfg.SearchAttributes)) {
		terms = append(terms, name+" IS NULL")
	}
	if len(terms) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.usableWait)
	defer cancel()
	for {
		_, err := g.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: g.namespace, Query: strings.Join(terms, " AND ")})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
