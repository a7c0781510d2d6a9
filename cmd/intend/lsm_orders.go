package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/intendhq/intend/client"
	"github.com/intendhq/intend/internal/lsm"
)

// Orders: several creates, updates and deletes sent as one request
// (POST /lsm/v1/orders), followed with GET /lsm/v1/orders/{id}.

func lsmOrderCommand(s *clientSettings) *cobra.Command {
	var key string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "order FILE.json [--wait]",
		Short: "Send an order: several creates, updates and deletes at once (POST /lsm/v1/orders)",
		Long: `Send the order in FILE ("-": standard input) and print its id. The order is
{"policy": "all_or_nothing" | "best_effort", "items": [...]}, each item
{"id", "operation": "create" | "update" | "delete", "service_entity",
"instance" (update, delete), "attributes" (create, update) or "edit"
(update, dict-path edits), "depends_on": [item ids]}; docs/lsm.md, "Orders".

The whole order is checked first: a bad item refuses it (422, every bad
item named), and nothing runs. With --wait, follow the order until it ends
and print every item's outcome; exit 1 unless it succeeded.

Examples:
  intend lsm order sites.json --wait
  intend lsm order sites.json --idempotency-key sites-2026-11-24
  intend lsm order show 01937e0c-...      one order and its items
  intend lsm orders --status running      the environment's orders
  intend lsm orders -o wide               with the failed items, who asked and when it started`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var body []byte
			var err error
			if args[0] == "-" {
				body, err = io.ReadAll(cmd.InOrStdin())
			} else {
				body, err = os.ReadFile(args[0])
			}
			if err != nil {
				return usageErrorf("read the order: %v", err)
			}
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			if key != "" {
				c = c.WithHeader("Idempotency-Key", key)
			}
			var o client.Order
			if err := c.Do(cmd.Context(), http.MethodPost, lsmPath("orders"),
				client.Raw{ContentType: "application/json", Body: body}, &o); err != nil {
				return err
			}
			if !wait {
				if s.structured() {
					return s.write(o)
				}
				return writeFields(s.stdout, "order", o.ID, "status", o.Status, "policy", o.Policy,
					"items", strconv.Itoa(o.ItemCount))
			}
			if o, err = waitOrder(cmd.Context(), c, o.ID, timeout); err != nil {
				return err
			}
			return printOrder(s, o, true)
		},
	}
	cmd.Flags().StringVar(&key, "idempotency-key", "", "send this Idempotency-Key: a repeat of the same order gets the first answer and starts nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the order until it ends, print every item's outcome, exit 1 unless it succeeded")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: give up after this long")
	cmd.AddCommand(lsmOrderShowCommand(s))
	return cmd
}

func lsmOrderShowCommand(s *clientSettings) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show an order and its items' outcomes (GET /lsm/v1/orders/{id})",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			var o client.Order
			if err := c.Do(cmd.Context(), http.MethodGet, lsmPath("orders", args[0]), nil, &o); err != nil {
				return err
			}
			return printOrder(s, o, false)
		},
	}
}

func lsmOrdersCommand(s *clientSettings) *cobra.Command {
	var status string
	cmd := &cobra.Command{
		Use:   "orders [--status S]",
		Short: "List the environment's orders, newest first (GET /lsm/v1/orders, every page)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := s.lsmClient()
			if err != nil {
				return err
			}
			q := url.Values{}
			if status != "" {
				q.Set("status", status)
			}
			items, err := c.List(cmd.Context(), lsmPath("orders"), q, "after", 0)
			if err != nil {
				return err
			}
			if s.structured() {
				return s.writeArray(items)
			}
			orders, err := decodeItems[client.Order](items)
			if err != nil {
				return err
			}
			t := s.table([]string{"ID", "POLICY", "STATUS", "ITEMS", "SUCCEEDED", "CREATED", "FINISHED"},
				"FAILED", "REQUESTED BY", "STARTED")
			for _, o := range orders {
				t.row(o.ID, o.Policy, o.Status, strconv.Itoa(o.ItemCount), strconv.Itoa(o.Counts[lsm.ItemSucceeded]),
					shortTime(o.CreatedAt), shortTimePtr(o.FinishedAt),
					strconv.Itoa(o.Counts[lsm.ItemFailed]), o.RequestedBy, shortTimePtr(o.StartedAt))
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only orders with this status (pending, running, compensating, succeeded, partially_failed, failed, compensated)")
	return cmd
}

// waitOrder polls an order until its status is final.
func waitOrder(ctx context.Context, c *client.Client, id string, timeout time.Duration) (client.Order, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	poll := 200 * time.Millisecond
	for {
		var o client.Order
		if err := c.Do(ctx, http.MethodGet, lsmPath("orders", id), nil, &o); err != nil {
			return o, err
		}
		if lsm.OrderFinal(o.Status) {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, fmt.Errorf("order %s still %s after %s (%d of %d items done); intend lsm order show %s follows it",
				id, o.Status, timeout, o.ItemCount-o.Counts[lsm.ItemPending]-o.Counts[lsm.ItemRunning], o.ItemCount, id)
		case <-time.After(poll):
		}
		poll = min(2*poll, 2*time.Second)
	}
}

// printOrder prints an order and its items; strict makes an order that
// did not succeed an error (exit 1), after it is printed.
func printOrder(s *clientSettings, o client.Order, strict bool) error {
	if s.structured() {
		if err := s.write(o); err != nil {
			return err
		}
	} else {
		if err := writeFields(s.stdout, "order", o.ID, "policy", o.Policy, "status", o.Status,
			"items", strconv.Itoa(o.ItemCount), "created", shortTime(o.CreatedAt), "finished", shortTimePtr(o.FinishedAt)); err != nil {
			return err
		}
		fmt.Fprintln(s.stdout)
		t := newTable(s.stdout, "ITEM", "OPERATION", "ENTITY", "INSTANCE", "STATUS", "STATE", "VERSION", "ERROR")
		for _, it := range o.Items {
			version := ""
			if it.Version != nil {
				version = strconv.FormatInt(*it.Version, 10)
			}
			t.row(it.ID, it.Operation, it.Entity, it.InstanceID, it.Status, it.State, version, it.Error)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if strict && o.Status != lsm.OrderSucceeded {
		return fmt.Errorf("order %s %s: %d of %d items succeeded", o.ID, o.Status, o.Counts[lsm.ItemSucceeded], o.ItemCount)
	}
	return nil
}
