package hostmem

import "testing"

// TestRead checks that the host's own figures, as the OS gives them, show
// some memory, and no more available than there is.
func TestRead(t *testing.T) {
	total, avail, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if total < 256<<20 || avail > total || avail == 0 {
		t.Errorf("total %d, available %d", total, avail)
	}
}
