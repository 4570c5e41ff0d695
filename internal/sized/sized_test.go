package sized

import (
	"testing"
	"unsafe"
)

type head struct{ a, b int }

func TestNew(t *testing.T) {
	for n := range 7 {
		h, e := New[head, string](n)
		if h == nil || len(e) != n || cap(e) != n {
			t.Fatalf("New(%d): head %v, %d elements (cap %d)", n, h, len(e), cap(e))
		}
		h2, e2, f2 := New2[head, string, int64](n)
		if h2 == nil || len(e2) != n || cap(e2) != n || len(f2) != n || cap(f2) != n {
			t.Fatalf("New2(%d): head %v, %d and %d elements", n, h2, len(e2), len(f2))
		}
		if n >= 1 && n <= 4 {
			// One allocation: the elements follow the head.
			if uintptr(unsafe.Pointer(&e[0])) != uintptr(unsafe.Pointer(h))+unsafe.Sizeof(head{}) {
				t.Errorf("New(%d): the elements are not beside the head", n)
			}
			if got := testing.AllocsPerRun(10, func() { New2[head, string, int64](n) }); got != 1 {
				t.Errorf("New2(%d): %v allocations, want 1", n, got)
			}
		}
	}
}
