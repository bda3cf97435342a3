package digests

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

// TestDigestCheck checks the outbound reader of verified blobs: it releases
// the last byte only when the content matches.
func TestDigestCheck(t *testing.T) {
	content := []byte("some blob content")
	sum := sha256.Sum256(content)
	for _, tc := range []struct {
		name string
		want []byte
		ok   bool
	}{
		{"match", sum[:], true},
		{"mismatch", make([]byte, sha256.Size), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := sha256.New()
			c := &digestCheck{src: io.TeeReader(bytes.NewReader(content), h), h: h, want: tc.want}
			var got bytes.Buffer
			buf := make([]byte, 3)
			var err error
			for err == nil {
				var n int
				n, err = c.Read(buf)
				got.Write(buf[:n])
			}
			if tc.ok && (err != io.EOF || !bytes.Equal(got.Bytes(), content)) {
				t.Fatalf("read %q, %v; want the whole content and io.EOF", got.Bytes(), err)
			}
			if !tc.ok && (!errors.Is(err, errDigestMismatch) || got.Len() != len(content)-1 || !c.mismatch.Load()) {
				t.Fatalf("read %d bytes, %v; want all but the last and a mismatch", got.Len(), err)
			}
		})
	}
}
