package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync/atomic"
)

// requestIDs hands out request ids that are unique across restarts (a random
// per-process prefix) and cheap to make (a counter), so a hot path does not
// read the system's random source for every request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &requestIDs{prefix: strings.ToUpper(hex.EncodeToString(b[:]))}
}

func (g *requestIDs) next() string {
	var b [40]byte // the 12-digit prefix and at most 16 digits of count
	id := append(b[:0], g.prefix...)
	id = strconv.AppendUint(id, g.n.Add(1), 16)
	for i := len(g.prefix); i < len(id); i++ {
		if c := id[i]; 'a' <= c && c <= 'f' {
			id[i] = c - 'a' + 'A'
		}
	}
	return string(id)
}
