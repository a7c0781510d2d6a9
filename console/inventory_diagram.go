package console

import (
	"fmt"

	"github.com/intendhq/intend/client"
)

// A lifecycle's state diagram, laid out on the server and drawn as an
// inline SVG (no script): the states in rows by their distance from the
// start (the walk lifecycleRows makes), a transfer to a later row as a
// curve down to it, one to the same or an earlier row as a curve around
// the right side. Colours tell the triggers apart, dashes the error
// transfers; the table below it says the same in words, for screen
// readers (the SVG is one image with a title).

// diagram is a laid-out lifecycle.
type diagram struct {
	ID    string // unique on the page: the entity's name
	W, H  int
	Nodes []dnode
	Edges []dedge
}

type dnode struct {
	X, Y, W, H int // the box
	CX, TY     int // the text's centre and first baseline
	Name       string
	Count      int
	Class      string
}

type dedge struct {
	D     string // the path
	Class string
	Title string
}

const (
	boxW, boxH = 150, 40
	colGap     = 24
	rowGap     = 40
	margin     = 16
)

// layout lays out the lifecycle of rows (lifecycleRows' order).
func layout(id string, l client.Lifecycle, rows []stateRow) diagram {
	depth := map[string]int{l.Start: 0}
	queue := []string{l.Start}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, t := range l.Transfers {
			if t.Source != s {
				continue
			}
			for _, to := range []string{t.Target, t.Error} {
				if _, ok := depth[to]; !ok && to != "" {
					depth[to] = depth[s] + 1
					queue = append(queue, to)
				}
			}
		}
	}
	maxDepth := 0
	for _, d := range depth {
		maxDepth = max(maxDepth, d)
	}
	// States the start does not reach (a lifecycle the catalog accepted
	// has none) go in a row of their own at the bottom.
	layers := make([][]stateRow, maxDepth+2)
	for _, r := range rows {
		d, ok := depth[r.Name]
		if !ok {
			d = maxDepth + 1
		}
		layers[d] = append(layers[d], r)
	}
	if len(layers[maxDepth+1]) == 0 {
		layers = layers[:maxDepth+1]
	}
	widest := 1
	for _, ly := range layers {
		widest = max(widest, len(ly))
	}
	inner := widest*boxW + (widest-1)*colGap
	// Room on the right for the curves that go back up.
	back := 0
	for _, t := range l.Transfers {
		for _, to := range []string{t.Target, t.Error} {
			if to != "" && depth[to] <= depth[t.Source] {
				back++
			}
		}
	}
	dg := diagram{ID: id, W: 2*margin + inner + 24 + 10*back, H: 2*margin + len(layers)*boxH + (len(layers)-1)*rowGap}
	pos := map[string]dnode{}
	for i, ly := range layers {
		width := len(ly)*boxW + (len(ly)-1)*colGap
		x0 := margin + (inner-width)/2
		for j, r := range ly {
			n := dnode{X: x0 + j*(boxW+colGap), Y: margin + i*(boxH+rowGap), W: boxW, H: boxH, Name: r.Name, Count: r.Count, Class: "lc-state"}
			n.CX, n.TY = n.X+boxW/2, n.Y+17
			if r.Count > 0 {
				n.Class += " occupied"
			}
			if r.Start {
				n.Class += " start"
			}
			if r.Terminal {
				n.Class += " terminal"
			}
			pos[r.Name] = n
			dg.Nodes = append(dg.Nodes, n)
		}
	}
	lane := 0
	for _, t := range l.Transfers {
		from, ok := pos[t.Source]
		if !ok {
			continue
		}
		for k, to := range []string{t.Target, t.Error} {
			dst, ok := pos[to]
			if !ok {
				continue
			}
			e := dedge{Class: "lc-edge t-" + t.Trigger, Title: fmt.Sprintf("%s: %s → %s", t.Trigger, t.Source, to)}
			if k == 1 {
				e.Class += " lc-err"
				e.Title += " (on error)"
			}
			if dst.Y > from.Y {
				sx, sy, tx, ty := from.CX, from.Y+boxH, dst.CX, dst.Y-2
				if k == 1 {
					sx += 20 // the error curve leaves beside the other
				}
				mid := (ty - sy) / 2
				e.D = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", sx, sy, sx, sy+mid, tx, ty-mid, tx, ty)
			} else {
				lane++
				sx, sy := from.X+boxW, from.Y+boxH/2
				tx, ty := dst.X+boxW+2, dst.Y+boxH/2+6
				cx := margin + inner + 12 + 10*lane
				e.D = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", sx, sy, cx, sy, cx, ty, tx, ty)
			}
			dg.Edges = append(dg.Edges, e)
		}
	}
	return dg
}
