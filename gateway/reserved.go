package gateway

import (
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
)

// checkReserved refuses a change of key when it lies under one of the
// reserved prefixes (Config.ReservedKeys): sweepgate's own records on the
// backend are written by sweepgate alone. A key is compared as the backend
// names it: routes and DeleteObjects keys are refused before this unless
// they are in the one form MinIO stores (checkKey).
func (g *Gateway) checkReserved(key string) error {
	for _, p := range g.reservedKeys {
		if p != "" && strings.HasPrefix(key, p) {
			return s3err.ErrAccessDenied.WithMessage("The key %s lies under %s, which holds sweepgate's own records; clients may read it, not change it.", key, p)
		}
	}
	return nil
}
