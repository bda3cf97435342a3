package gateway

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
)

// connectionTokens are what a client's Connection header may say. Every
// other token names a header that the reverse proxy would remove after the
// gateway had read the request with it (Connection: x-amz-copy-source turns
// a verified copy into a plain PUT of the body), so that the backend
// would execute another request than the one the gateway judged.
var connectionTokens = []string{"close", "keep-alive", "te"}

// checkConnection refuses a request whose Connection header names
// anything but close, keep-alive and TE. The hop-by-hop headers
// themselves (Keep-Alive, TE, Upgrade, ...) carry no S3 meaning; the
// proxy drops them.
func checkConnection(h http.Header) error {
	for _, v := range h.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.ToLower(textproto.TrimString(tok))
			if tok != "" && !slices.Contains(connectionTokens, tok) {
				return s3err.ErrInvalidRequest.WithMessage("The Connection header names %q: through sweepgate it may name only close, keep-alive and TE.", tok)
			}
		}
	}
	return nil
}

// checkBackendControls refuses a request carrying one of MinIO's own
// control headers (x-minio-*), signed or not. They are not S3: with
// x-minio-force-delete, for one, MinIO turns the DELETE of one name into
// the delete of everything under it, or of a whole non-empty bucket, with
// the gateway's credentials, and no session, reference or trash would see
// what went.
func checkBackendControls(h http.Header) error {
	for name := range h {
		if l := strings.ToLower(name); strings.HasPrefix(l, "x-minio-") {
			return s3err.ErrInvalidArgument.WithMessage("%s is not accepted through sweepgate: MinIO's own control headers are not part of the S3 API it serves.", l)
		}
	}
	return nil
}
