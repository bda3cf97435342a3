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
	return g.prefix + strings.ToUpper(strconv.FormatUint(g.n.Add(1), 16))
}
