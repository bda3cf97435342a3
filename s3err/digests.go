package s3err

import "net/http"

// The errors of digest reclamation: the answers the gateway gives when a
// write or delete in a content-addressed layout cannot go ahead as asked.
var (
	// ErrSlowDown is S3's retryable refusal. The gateway gives it when a
	// reference write names a blob whose bytes are being deleted, or when
	// another write of the same object is in flight: a retry later succeeds.
	ErrSlowDown = &Error{Code: "SlowDown", Message: "Please reduce your request rate.", HTTPStatus: http.StatusServiceUnavailable}
	// ErrNoSuchKey answers a read of a blob whose bytes are being deleted,
	// so that a producer uploads it again rather than trusting it.
	ErrNoSuchKey = &Error{Code: "NoSuchKey", Message: "The specified key does not exist.", HTTPStatus: http.StatusNotFound}
	// ErrBlobReferenced refuses a client's delete of a blob that a
	// reference object (or an unexpired trash entry) still names. S3 has no
	// such code; 409 is the status S3 uses for a conflict with the
	// resource's state.
	ErrBlobReferenced = &Error{Code: "BlobReferenced", Message: "The blob is still referenced.", HTTPStatus: http.StatusConflict}
	// ErrBlobNotStored refuses a write that names a blob that is not
	// stored (deleted, or never uploaded), in a source that confirms the
	// blobs it names: nothing of the write is stored, and the producer
	// uploads the blob again. 409, as for BlobReferenced.
	ErrBlobNotStored = &Error{Code: "BlobNotStored", Message: "A blob the object names is not stored.", HTTPStatus: http.StatusConflict}
	// ErrMalformedXML refuses a request document that does not parse.
	ErrMalformedXML = &Error{Code: "MalformedXML", Message: "The XML you provided was not well-formed or did not validate against our published schema.", HTTPStatus: http.StatusBadRequest}
	// ErrPreconditionFailed refuses a request whose condition does not hold.
	ErrPreconditionFailed = &Error{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold.", HTTPStatus: http.StatusPreconditionFailed}
)
