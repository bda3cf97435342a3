package gateway

import (
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// maxUploadSize is the largest body S3 takes in one PutObject or one
// UploadPart: 5 GiB. Larger objects are uploaded in parts.
const maxUploadSize = 5 << 30

// checkDeclaredSize refuses, with S3's EntityTooLarge, a PutObject or
// UploadPart whose declared body (Content-Length, or the
// x-amz-decoded-content-length of an aws-chunked body) is larger than
// maxUploadSize. It runs before a byte of the body is read, before a
// session records activity and before the backend is asked: otherwise the
// gateway would open a backend request for the whole declared length and
// hold the connection while the client trickles it in. A body of unknown
// length (-1) is left to the backend.
func checkDeclaredSize(op s3op.Operation, declared int64) error {
	switch op {
	case s3op.PutObject, s3op.UploadPart:
		if declared > maxUploadSize {
			return s3err.ErrEntityTooLarge.WithMessage("Your proposed upload exceeds the maximum allowed size: %d bytes declared, at most %d in one %s.", declared, int64(maxUploadSize), op)
		}
	}
	return nil
}
