package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
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

// logFor returns the gateway's logger with the id of the request ctx
// serves, for the helpers that log without the request at hand: every line
// written while serving a request carries the id that its request line,
// its x-amz-request-id header and its S3 error body carry, so that one
// search finds everything about a request. Outside a request it is the
// gateway's logger as it is.
func (g *Gateway) logFor(ctx context.Context) *slog.Logger {
	if req := requestFrom(ctx); req != nil {
		return g.log.With("id", req.id)
	}
	return g.log
}
