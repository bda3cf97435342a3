package s3client

import "io"

// ListingResult is what DecodeUploadListing and DecodeUploadListingXML
// return: listUploadsResult's fields.
type ListingResult = listUploadsResult

// DecodeUploadListing is decodeUploadListing.
func DecodeUploadListing(r io.Reader) (*ListingResult, bool, error) {
	return decodeUploadListing(r)
}
