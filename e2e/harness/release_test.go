package harness

import (
	"strings"
	"testing"
)

func TestPreviousRelease(t *testing.T) {
	const (
		a = "0123456789abcdef0123456789abcdef01234567"
		b = "89abcdef0123456789abcdef0123456789abcdef"
	)
	changelog := "# Changelog\n\n## Unreleased\n\n- more\n\n## 1.1.0\n\nCommit: " + b + "\n\n## 1.0.0\n\nCommit: " + a + "\n"
	cutting := "# Changelog\n\n## 1.2.0\n\nCommit: (recorded when the release is cut)\n\n## 1.1.0\n\nCommit: " + b + "\n"
	for _, tc := range []struct {
		name, changelog, current string
		want                     Release
		err                      string
	}{
		{"a development tree", changelog, "1.2.0-dev", Release{"1.1.0", b}, ""},
		{"the release's own commit", changelog, "1.1.0", Release{"1.0.0", a}, ""},
		{"a release being cut", cutting, "1.2.0", Release{"1.1.0", b}, ""},
		{"an entry without its commit", "## 1.1.0\n\n- things\n\n## 1.0.0\n\nCommit: " + a + "\n", "1.2.0-dev", Release{}, "release 1.1.0 names no commit"},
		{"the first release", "## 1.0.0\n\nCommit: (recorded when the release is cut)\n", "1.0.0", Release{}, "no release before 1.0.0"},
	} {
		got, err := previousRelease(strings.NewReader(tc.changelog), tc.current)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: got %+v, %v; want %+v, %q", tc.name, got, err, tc.want, tc.err)
		}
	}
}
