package s3client

import "encoding/xml"

// The documents of the calls the client makes, with the elements it reads.
// Every result document names its root element: a success status whose
// body is some other document (a proxy's page, an empty body) fails to
// decode, so it is an unclear answer, never an empty listing or a delete
// with no failures.

// errorDocument is an S3 <Error> document.
type errorDocument struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// resultDocument is any result document carrying an ETag
// (CopyObjectResult, CompleteMultipartUploadResult, CopyPartResult).
type resultDocument struct {
	XMLName xml.Name
	ETag    string `xml:"ETag"`
}

type listBucketsResult struct {
	XMLName xml.Name `xml:"ListAllMyBucketsResult"`
	Buckets []struct {
		Name string `xml:"Name"`
	} `xml:"Buckets>Bucket"`
	ContinuationToken string `xml:"ContinuationToken"`
}

type listUploadsResult struct {
	EncodingType       string `xml:"EncodingType"`
	NextKeyMarker      string `xml:"NextKeyMarker"`
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	IsTruncated        bool   `xml:"IsTruncated"`
	Uploads            []struct {
		Key       string `xml:"Key"`
		UploadID  string `xml:"UploadId"`
		Initiated string `xml:"Initiated"`
	} `xml:"Upload"`
}

type listPartsResult struct {
	XMLName              xml.Name `xml:"ListPartsResult"`
	IsTruncated          bool     `xml:"IsTruncated"`
	NextPartNumberMarker string   `xml:"NextPartNumberMarker"`
	Parts                []struct {
		PartNumber   int    `xml:"PartNumber"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
		LastModified string `xml:"LastModified"`
	} `xml:"Part"`
}

type listObjectsResult struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	EncodingType          string   `xml:"EncodingType"`
	IsTruncated           bool     `xml:"IsTruncated"`
	NextContinuationToken string   `xml:"NextContinuationToken"`
	Contents              []struct {
		Key          string `xml:"Key"`
		Size         int64  `xml:"Size"`
		ETag         string `xml:"ETag"`
		LastModified string `xml:"LastModified"`
	} `xml:"Contents"`
}

type deleteKey struct {
	Key string `xml:"Key"`
}

type deleteRequest struct {
	XMLName xml.Name    `xml:"Delete"`
	Quiet   bool        `xml:"Quiet"`
	Objects []deleteKey `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name    `xml:"DeleteResult"`
	Deleted []deleteKey `xml:"Deleted"`
	Errors  []struct {
		Key     string `xml:"Key"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}
