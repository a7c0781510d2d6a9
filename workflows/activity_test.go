package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestActivitiesOnlyThroughHandles: the workflows schedule activities
// only through their typed handles (activity.go): no other file calls
// workflow.ExecuteActivity or ExecuteLocalActivity (which take any name
// and any input, and compile with a handle passed as the name), and no
// handle is made as a literal (it would have no name, or one Activities
// does not list).
func TestActivitiesOnlyThroughHandles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "activity.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "workflow" &&
					(n.Sel.Name == "ExecuteActivity" || n.Sel.Name == "ExecuteLocalActivity") {
					t.Errorf("%s: workflow.%s: run the activity through its handle (Run, RunLocal, Start)",
						fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.CompositeLit:
				typ := n.Type
				if ix, ok := typ.(*ast.IndexExpr); ok {
					typ = ix.X
				}
				if ix, ok := typ.(*ast.IndexListExpr); ok {
					typ = ix.X
				}
				if id, ok := typ.(*ast.Ident); ok && (id.Name == "Activity" || id.Name == "ActivityNoResult") {
					t.Errorf("%s: a handle literal: declare it with newActivity or newActivityNoResult",
						fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
}

// TestActivityNames: the handles keep the names histories were recorded
// with (a rename breaks every run in flight and every replay), each
// declared once.
func TestActivityNames(t *testing.T) {
	want := []string{
		"intend.AllocateValues", "intend.ApplyTransfer", "intend.BuildCompile", "intend.CheckInstanceDeploy", "intend.ExecuteBatch",
		"intend.ExportInstance", "intend.FetchCompile", "intend.FinishCompile", "intend.FinishDeploy",
		"intend.LoadInstance", "intend.LoadOrder", "intend.MarkBatch", "intend.MarkOrderItems",
		"intend.NotifyModelChanged", "intend.PlanDeploy", "intend.PlanRetry", "intend.ReleaseCompile",
		"intend.RouteAgents", "intend.RunOrderItems", "intend.RunOutcome", "intend.SetOrderStatus",
		"intend.TakeCompile", "intend.TakeRequests", "intend.ValidateInstance",
	}
	if got := Activities(); !slices.Equal(got, want) {
		t.Errorf("Activities() = %q, want %q (a new activity: add its name here)", got, want)
	}
	if ApplyTransferActivity.Name() != "intend.ApplyTransfer" || FinishDeployActivity.Name() != "intend.FinishDeploy" {
		t.Errorf("a handle's Name is not the name it was declared with")
	}
}
