package sigv4

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"strings"
	"sync"
)

// crc64NVMEPoly is the CRC-64/NVME polynomial in the reversed form that
// hash/crc64 expects (the normal form is 0xad93d23594c93659).
const crc64NVMEPoly = 0x9a6c9329ac4bc9b5

// crc64NVMETable is built on first use: hash/crc64 caches only its own two
// tables, and rebuilding this one for every upload would be waste.
var crc64NVMETable = sync.OnceValue(func() *crc64.Table { return crc64.MakeTable(crc64NVMEPoly) })

// checksumAlgo is one of the trailing checksums S3 accepts in aws-chunked
// uploads. Its value on the wire is the base64 (standard, padded) encoding of
// the big-endian digest.
type checksumAlgo struct {
	header string // lower-case trailer name, e.g. x-amz-checksum-crc32
	size   int    // digest length in bytes
	new    func() hash.Hash
}

// encodedLen is the length of the base64 value, which is fixed per
// algorithm; the outbound re-encoder relies on it to know its
// Content-Length before the digest exists.
func (a checksumAlgo) encodedLen() int { return base64.StdEncoding.EncodedLen(a.size) }

// lookupChecksum returns the algorithm for a trailer name as sent in
// x-amz-trailer (case-insensitive).
func lookupChecksum(name string) (checksumAlgo, bool) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "x-amz-checksum-crc32":
		return checksumAlgo{"x-amz-checksum-crc32", crc32.Size, func() hash.Hash { return crc32.NewIEEE() }}, true
	case "x-amz-checksum-crc32c":
		return checksumAlgo{"x-amz-checksum-crc32c", crc32.Size, func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }}, true
	case "x-amz-checksum-crc64nvme":
		return checksumAlgo{"x-amz-checksum-crc64nvme", crc64.Size, func() hash.Hash { return crc64.New(crc64NVMETable()) }}, true
	case "x-amz-checksum-sha1":
		return checksumAlgo{"x-amz-checksum-sha1", sha1.Size, sha1.New}, true
	case "x-amz-checksum-sha256":
		return checksumAlgo{"x-amz-checksum-sha256", sha256.Size, sha256.New}, true
	}
	return checksumAlgo{}, false
}
