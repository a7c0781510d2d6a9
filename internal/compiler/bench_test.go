package compiler

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// siteInstances is siteModel with n instances.
func siteInstances(n int) string {
	var b strings.Builder
	b.WriteString(strings.Split(siteModel, "\tinstances: blog")[0])
	for i := range n {
		fmt.Fprintf(&b, "\tinstances: s%d: title: \"Site %d\"\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

func benchmarkCompile(b *testing.B, n int) {
	dir := writeProject(b, map[string]string{"main.cue": strings.ReplaceAll(siteInstances(n), `=~"^[a-z]+$"`, `=~"^[a-z0-9]+$"`)})
	b.ResetTimer()
	for b.Loop() {
		res, err := Compile(context.Background(), Options{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		if res.Instances != n {
			b.Fatalf("%d instances", res.Instances)
		}
	}
}

func BenchmarkCompile1(b *testing.B)    { benchmarkCompile(b, 1) }
func BenchmarkCompile1000(b *testing.B) { benchmarkCompile(b, 1000) }
