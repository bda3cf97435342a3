package s3err

import "net/http"

// The errors of digest reclamation: the answers the gateway gives when a
// write or delete in a content-addressed layout cannot go ahead as asked.
var (
	// ErrSlowDown is S3's retryable refusal. The gateway gives it when a
	// reference write names a blob whose bytes are being deleted, or when
	// another write of the same object is in flight: a retry later succeeds.
	ErrSlowDown = &Error{"SlowDown", "Please reduce your request rate.", http.StatusServiceUnavailable}
	// ErrNoSuchKey answers a read of a blob whose bytes are being deleted,
	// so that a producer uploads it again rather than trusting it.
	ErrNoSuchKey = &Error{"NoSuchKey", "The specified key does not exist.", http.StatusNotFound}
	// ErrBlobReferenced refuses a client's delete of a blob that a
	// reference object (or an unexpired trash entry) still names. S3 has no
	// such code; 409 is the status S3 uses for a conflict with the
	// resource's state.
	ErrBlobReferenced = &Error{"BlobReferenced", "The blob is still referenced.", http.StatusConflict}
	// ErrBlobNotStored refuses a write that names a blob that is not
	// stored (deleted, or never uploaded), in a source that confirms the
	// blobs it names: nothing of the write is stored, and the producer
	// uploads the blob again. 409, as for BlobReferenced.
	ErrBlobNotStored = &Error{"BlobNotStored", "A blob the object names is not stored.", http.StatusConflict}
	// ErrMalformedXML refuses a request document that does not parse.
	ErrMalformedXML = &Error{"MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema.", http.StatusBadRequest}
	// ErrPreconditionFailed refuses a request whose condition does not hold.
	ErrPreconditionFailed = &Error{"PreconditionFailed", "At least one of the pre-conditions you specified did not hold.", http.StatusPreconditionFailed}
)
