package etcdstore_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/sweepgate/sweepgate/etcdstore"
)

// randomPart draws a part record from the shapes the gateway writes and
// from edge cases it may meet: quoted and unquoted ETags (empty too), hex
// SHA-256 sums and other strings, zero and recent times, zero sizes.
func randomPart(r *rand.Rand) Part {
	p := Part{Number: 1 + r.IntN(10000), Size: r.Int64N(5 << 30)}
	sum := sha256.Sum256(fmt.Appendf(nil, "%d", r.Int()))
	switch r.IntN(5) {
	case 0:
		p.ETag = `"` + hex.EncodeToString(sum[:16]) + `"`
	case 1:
		p.ETag = `"` + hex.EncodeToString(sum[:16]) + `-3"`
	case 2:
		p.ETag = hex.EncodeToString(sum[:16])
	case 3:
		p.ETag = []string{"", `""`, `"`, `"a`, `a"`, `"\"x"`}[r.IntN(6)]
	}
	switch r.IntN(4) {
	case 0, 1:
		p.SHA256 = hex.EncodeToString(sum[:])
	case 2:
		p.SHA256 = []string{"sha", "ABCDEF", hex.EncodeToString(sum[:16])}[r.IntN(3)]
	}
	if r.IntN(5) > 0 {
		p.At = time.Unix(1_700_000_000+r.Int64N(1e9), r.Int64N(1e9)).UTC()
	}
	if r.IntN(10) == 0 {
		p.Size = 0
	}
	return p
}

// TestPartLayoutsRoundTrip: a part record reads back exactly as it was
// written, in either layout, for generated parts.
func TestPartLayoutsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		p := randomPart(r)
		for _, v := range []int{1, 2} {
			val, err := EncodePart(p, v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodePart("k", val)
			if err != nil {
				t.Fatalf("case %d, layout %d (%s): %v", i, v, val, err)
			}
			want := p
			want.Version = v
			if !got.At.Equal(want.At) || got.At.IsZero() != want.At.IsZero() {
				t.Fatalf("case %d, layout %d (%s): time %v, want %v", i, v, val, got.At, want.At)
			}
			got.At, want.At = time.Time{}, time.Time{}
			if got != want {
				t.Fatalf("case %d, layout %d (%s): read %+v, want %+v", i, v, val, got, want)
			}
		}
	}
}

// TestPartLayoutTwoIsSmaller: the compact layout of a part as the gateway
// writes it takes at most four fifths of the first layout's bytes.
func TestPartLayoutTwoIsSmaller(t *testing.T) {
	sum := sha256.Sum256([]byte("part"))
	p := Part{Number: 17, ETag: `"` + hex.EncodeToString(sum[:16]) + `"`, Size: 5 << 20, SHA256: hex.EncodeToString(sum[:]),
		At: time.Date(2026, 12, 6, 20, 22, 25, 123456789, time.UTC)}
	v1, _ := EncodePart(p, 1)
	v2, _ := EncodePart(p, 2)
	if 5*len(v2) > 4*len(v1) {
		t.Errorf("layout 2 takes %d bytes (%s), layout 1 %d (%s)", len(v2), v2, len(v1), v1)
	}
	t.Logf("layout 1: %d bytes, layout 2: %d bytes", len(v1), len(v2))
}

// TestPartLayoutsRefuse: a part of a newer layout, or with a field
// neither layout has, is refused as newer; one mixing the two layouts'
// fields is refused as damaged. Nothing of either is returned.
func TestPartLayoutsRefuse(t *testing.T) {
	for _, tc := range []struct {
		value string
		newer bool
	}{
		{`{"v":3,"n":1,"e":"x"}`, true},
		{`{"v":2,"n":1,"e":"x","later":1}`, true},
		{`{"n":1,"etag":"x","z":1}`, true},
		{`{"n":1,"etag":"\"x\"","e":"x"}`, false},
		{`{"v":2,"n":1,"e":"x","size":3}`, false},
		{`{"v":2,"n":1,"h":"%%%"}`, false},
	} {
		p, err := DecodePart("/sweepgate/parts/u/00001", []byte(tc.value))
		if err == nil || errors.Is(err, ErrNewerRecord) != tc.newer {
			t.Errorf("%s: %v; want refused (as newer: %v)", tc.value, err, tc.newer)
		}
		if p != (Part{}) {
			t.Errorf("%s: returned %+v with the error", tc.value, p)
		}
	}
}
