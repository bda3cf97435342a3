package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// pinnedImage is an image reference with a tag and a digest:
// NAME:TAG@sha256:HEX.
var pinnedImage = regexp.MustCompile(`^[a-z0-9./-]+:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$`)

// TestBaseImagesPinned checks that every image a Dockerfile builds FROM
// is pinned by digest, with its tag kept for people to read, so that a
// build uses the bytes that were reviewed. A FROM naming an earlier stage
// of the same file is not an image.
func TestBaseImagesPinned(t *testing.T) {
	for _, file := range []string{"../Dockerfile", "minio/Dockerfile"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		stages := map[string]bool{}
		froms := 0
		for i, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
				continue
			}
			froms++
			image := fields[1]
			if strings.HasPrefix(image, "--platform=") && len(fields) > 2 {
				image = fields[2]
			}
			if len(fields) >= 4 && strings.EqualFold(fields[len(fields)-2], "AS") {
				stages[fields[len(fields)-1]] = true
			}
			if stages[image] {
				continue
			}
			if !pinnedImage.MatchString(image) {
				t.Errorf("%s:%d: FROM %s is not pinned as NAME:TAG@sha256:DIGEST", file, i+1, image)
			}
		}
		if froms == 0 {
			t.Errorf("%s has no FROM line", file)
		}
	}
}
