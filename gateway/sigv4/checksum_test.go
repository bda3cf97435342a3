package sigv4

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"testing"
)

// TestChecksumCheckValues pins each algorithm to its published check value
// (the digest of "123456789") and the base64 length the outbound encoder
// relies on.
func TestChecksumCheckValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check string // hex digest of "123456789"
	}{
		{"x-amz-checksum-crc32", "cbf43926"},
		{"x-amz-checksum-crc32c", "e3069283"},
		{"x-amz-checksum-crc64nvme", "ae8b14860a799888"},
		{"x-amz-checksum-sha1", "f7c3bc1d808e04732adf679965ccc34ca7ae3441"},
		{"x-amz-checksum-sha256", "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, name := range []string{tc.name, " X-Amz-Checksum-" + tc.name[len("x-amz-checksum-"):] + " "} {
				a, ok := lookupChecksum(name)
				if !ok || a.header != tc.name {
					t.Fatalf("lookupChecksum(%q) = %+v, %v", name, a, ok)
				}
			}
			a, _ := lookupChecksum(tc.name)
			h := a.new()
			h.Write([]byte("123456789"))
			sum := h.Sum(nil)
			if got := hex.EncodeToString(sum); got != tc.check {
				t.Fatalf("digest %s, want %s", got, tc.check)
			}
			if len(sum) != a.size || len(base64.StdEncoding.EncodeToString(sum)) != a.encodedLen() {
				t.Fatalf("size %d, encoded length %d", a.size, a.encodedLen())
			}
		})
	}
	if _, ok := lookupChecksum("x-amz-checksum-md5"); ok {
		t.Fatal("md5 is not a trailing checksum")
	}
}

// TestCRC64NVMEBigEndian: S3 sends the CRC64-NVME digest big-endian, which
// hash/crc64's Sum produces.
func TestCRC64NVMEBigEndian(t *testing.T) {
	a, _ := lookupChecksum("x-amz-checksum-crc64nvme")
	h := a.new()
	h.Write([]byte("123456789"))
	if got := binary.BigEndian.Uint64(h.Sum(nil)); got != 0xae8b14860a799888 {
		t.Fatalf("crc64nvme = %#x", got)
	}
}
