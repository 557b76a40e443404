package poison

import "testing"

// TestFill: under the ringpoison tag Fill overwrites every byte with
// Pattern; without it, it leaves them alone.
func TestFill(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4095, 4096, 65537} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i)
		}
		Fill(b)
		for i, c := range b {
			want := byte(i)
			if Enabled {
				want = Pattern
			}
			if c != want {
				t.Fatalf("Fill of %d bytes: byte %d is %#x, want %#x (Enabled %v)", n, i, c, want, Enabled)
			}
		}
	}
}
