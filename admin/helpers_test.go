package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// decodeAPIError reads an error document; ok is false when body is not
// one.
func decodeAPIError(body []byte) (e adminapi.ErrorDetail, ok bool) {
	var doc adminapi.ErrorBody
	if json.Unmarshal(body, &doc) != nil || doc.Error.Code == "" {
		return adminapi.ErrorDetail{}, false
	}
	return doc.Error, true
}
