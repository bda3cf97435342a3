package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// Release is a release recorded in CHANGELOG.md: its version and the
// commit it was cut from.
type Release struct {
	Version string
	Commit  string
}

var (
	releaseHeading = regexp.MustCompile(`^## (\d+\.\d+\.\d+)\s*$`)
	releaseCommit  = regexp.MustCompile(`^Commit: ([0-9a-f]{40})\s*$`)
)

// PreviousRelease returns the newest release in CHANGELOG.md whose version
// is not the one this tree builds (VERSION): the release a rolling upgrade
// to this tree starts from. Every release entry must name its commit.
func PreviousRelease(t testing.TB) Release {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	current, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	f, err := os.Open(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	defer f.Close()
	r, err := previousRelease(f, strings.TrimSpace(string(current)))
	if err != nil {
		t.Fatalf("harness: CHANGELOG.md: %v", err)
	}
	return r
}

// previousRelease reads a changelog for the newest release whose version
// is not current. The entry of current, if it is a release being cut,
// names its commit only in a later commit: it is passed over.
func previousRelease(changelog io.Reader, current string) (Release, error) {
	var version string
	sc := bufio.NewScanner(changelog)
	for sc.Scan() {
		if m := releaseHeading.FindStringSubmatch(sc.Text()); m != nil {
			if version != "" {
				break
			}
			if version = m[1]; version == current {
				version = ""
			}
			continue
		}
		if m := releaseCommit.FindStringSubmatch(sc.Text()); m != nil && version != "" {
			return Release{Version: version, Commit: m[1]}, nil
		}
	}
	if err := sc.Err(); err != nil {
		return Release{}, err
	}
	if version != "" {
		return Release{}, fmt.Errorf("release %s names no commit (a line \"Commit: <40 hex digits>\" under its heading)", version)
	}
	return Release{}, fmt.Errorf("no release before %s", current)
}

var releaseBuilds struct {
	mu   sync.Mutex
	bins map[string]string
	errs map[string]error
}

// BuildRelease builds the sweepgate binary of release r from its commit,
// checked out in a git worktree of this repository, stamped with its
// version and commit, once per test process; it fails the test when the
// checkout does not hold the commit (a shallow clone) or it does not
// build.
func BuildRelease(t testing.TB, r Release) string {
	t.Helper()
	releaseBuilds.mu.Lock()
	defer releaseBuilds.mu.Unlock()
	if releaseBuilds.bins == nil {
		releaseBuilds.bins, releaseBuilds.errs = map[string]string{}, map[string]error{}
	}
	if bin, ok := releaseBuilds.bins[r.Commit]; ok {
		return bin
	}
	if err, ok := releaseBuilds.errs[r.Commit]; ok {
		t.Fatalf("harness: %v", err)
	}
	bin, err := buildRelease(r)
	if err != nil {
		releaseBuilds.errs[r.Commit] = err
		t.Fatalf("harness: %v", err)
	}
	releaseBuilds.bins[r.Commit] = bin
	return bin
}

func buildRelease(r Release) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "sweepgate-release-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	run := func(dir string, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	addSharedCleanup(func() {
		_ = run(root, "git", "worktree", "remove", "--force", src)
		os.RemoveAll(dir)
		_ = run(root, "git", "worktree", "prune")
	})
	if err := run(root, "git", "cat-file", "-e", r.Commit+"^{commit}"); err != nil {
		return "", fmt.Errorf("release %s: this checkout does not hold its commit %s (a shallow clone?): %v", r.Version, r.Commit, err)
	}
	if err := run(root, "git", "worktree", "add", "--detach", src, r.Commit); err != nil {
		return "", fmt.Errorf("release %s: %w", r.Version, err)
	}
	bin := filepath.Join(dir, "sweepgate-"+r.Version)
	ldflags := "-X main.version=" + r.Version + " -X main.revision=" + r.Commit
	if err := run(src, "go", "build", "-ldflags", ldflags, "-o", bin, "./cmd/sweepgate"); err != nil {
		return "", fmt.Errorf("release %s: %w", r.Version, err)
	}
	return bin, nil
}
