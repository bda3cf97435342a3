package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

const (
	algorithm        = "AWS4-HMAC-SHA256"
	chunkAlgorithm   = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerAlgorithm = "AWS4-HMAC-SHA256-TRAILER"
	scopeTerminal    = "aws4_request"
	// emptySHA256 is hex(sha256("")), which also stands in the chunk string
	// to sign where AWS reserves a field for a hash of chunk headers.
	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	// maxCachedKeys bounds the signing-key cache. Keys change once a day per
	// credential and region, so a busy gateway needs a handful; the bound only
	// stops a flood of distinct scopes from growing memory.
	maxCachedKeys = 1024
)

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// deriveKey computes the SigV4 signing key for one day, region and service.
func deriveKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, scopeTerminal)
}

// keyCacheKey includes the secret itself, not the access key, so that a
// rotated secret never meets a key derived from the old one.
type keyCacheKey struct{ secret, date, region, service string }

// keyCache memoises derived signing keys: four HMACs per request are cheap,
// but chunked uploads and busy clients reuse the same scope all day.
type keyCache struct {
	mu   sync.Mutex
	keys map[keyCacheKey]*signingKey
}

// signingKey is a derived signing key with a pool of HMAC states keyed
// with it, so that a signature made with it allocates no HMAC.
type signingKey struct {
	key  []byte
	macs sync.Pool // of hash.Hash, hmac-sha256 keyed with key
}

// hexSum appends the lower-case hex HMAC-SHA256 of data under the key to dst.
func (k *signingKey) hexSum(dst, data []byte) []byte {
	var mac [sha256.Size]byte
	return hex.AppendEncode(dst, k.sum(mac[:0], data))
}

// sum appends the HMAC-SHA256 of data under the key to dst.
func (k *signingKey) sum(dst, data []byte) []byte {
	m, _ := k.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, k.key)
	} else {
		m.Reset()
	}
	m.Write(data)
	dst = m.Sum(dst)
	k.macs.Put(m)
	return dst
}

func (c *keyCache) get(secret, date, region, service string) []byte {
	return c.signingKey(secret, date, region, service).key
}

func (c *keyCache) signingKey(secret, date, region, service string) *signingKey {
	k := keyCacheKey{secret, date, region, service}
	c.mu.Lock()
	key, ok := c.keys[k]
	c.mu.Unlock()
	if ok {
		return key
	}
	key = &signingKey{key: deriveKey(secret, date, region, service)}
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		// Dropping everything is crude but bounded, and the next request per
		// scope simply derives its key again.
		c.keys = make(map[keyCacheKey]*signingKey)
	}
	c.keys[k] = key
	c.mu.Unlock()
	return key
}

// stringToSign builds the SigV4 string to sign for a canonical request.
func stringToSign(amzDate, scope, canonicalRequest string) string {
	return algorithm + "\n" + amzDate + "\n" + scope + "\n" + sha256Hex(canonicalRequest)
}

// signHex signs s with key and returns the lower-case hex signature.
func signHex(key []byte, s string) string {
	return hex.EncodeToString(hmacSHA256(key, s))
}

// matches reports whether given is the lower-case hex signature of
// stringToSign under the key, compared in constant time.
func (k *signingKey) matches(stringToSign, given string) bool {
	var buf [2 * sha256.Size]byte
	return hmac.Equal(k.hexSum(buf[:0], []byte(stringToSign)), []byte(given))
}

// signatureEqual compares a computed signature with the one a client sent in
// constant time, so that timing does not reveal how much of a guess matched.
func signatureEqual(computed, given string) bool {
	return hmac.Equal([]byte(computed), []byte(given))
}

// chunkStringToSign is the string to sign for one aws-chunked data chunk:
// each chunk's signature chains to the previous one, starting at the seed
// signature of the request itself.
func chunkStringToSign(amzDate, scope, prevSig, chunkHashHex string) string {
	return chunkAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + prevSig + "\n" + emptySHA256 + "\n" + chunkHashHex
}

// trailerStringToSign is the string to sign for the trailing headers of a
// signed aws-chunked upload; it chains to the final (zero-length) chunk.
func trailerStringToSign(amzDate, scope, prevSig, trailerHashHex string) string {
	return trailerAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + prevSig + "\n" + trailerHashHex
}
