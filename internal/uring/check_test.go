//go:build linux

package uring

import "testing"

func TestCheck(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func BenchmarkCheck(b *testing.B) {
	for b.Loop() {
		if err := Check(); err != nil {
			b.Fatal(err)
		}
	}
}
