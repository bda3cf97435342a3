package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// opsTableHeader starts the configuration table of docs/operations.md.
const opsTableHeader = "| setting (YAML key) | environment | default | what it is |"

// opsTableRow is one row of docs/operations.md's configuration table.
type opsTableRow struct {
	line     int
	keys     []string
	envCell  string
	envNames []string
}

// opsConfigRows reads the configuration table of docs/operations.md. A key cell
// lists keys in backquotes; one that starts with "." continues the key
// before it (`etcd.embedded.data_dir`, `.client_url` is
// etcd.embedded.client_url).
func opsConfigRows(t *testing.T) []opsTableRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == opsTableHeader {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("docs/operations.md has no configuration table starting %q", opsTableHeader)
	}
	code := regexp.MustCompile("`([^`]*)`")
	var rows []opsTableRow
	for i := start + 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := strings.Split(strings.Trim(lines[i], "| "), " | ")
		if len(cells) != 4 {
			t.Errorf("docs/operations.md:%d: %d cells, want 4: %q", i+1, len(cells), lines[i])
			continue
		}
		row := opsTableRow{line: i + 1, envCell: cells[1]}
		prev := ""
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			key := m[1]
			if strings.HasPrefix(key, ".") {
				if j := strings.LastIndex(prev, "."); j >= 0 {
					key = prev[:j] + key
				} else {
					t.Errorf("docs/operations.md:%d: %q continues no dotted key", i+1, key)
				}
			}
			row.keys = append(row.keys, key)
			prev = key
		}
		for _, m := range code.FindAllStringSubmatch(cells[1], -1) {
			row.envNames = append(row.envNames, m[1])
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("docs/operations.md's configuration table has no rows")
	}
	return rows
}

// TestOperationsConfigurationTable keeps docs/operations.md's configuration table true
// to Settings: every key it names is a setting, and its environment column
// names each key's variable, either one by one in the keys' order or as
// one PREFIX_* that every key's variable starts with.
func TestOperationsConfigurationTable(t *testing.T) {
	t.Parallel()
	byKey := map[string]Setting{}
	for _, s := range Settings() {
		byKey[s.Key] = s
	}
	for _, row := range opsConfigRows(t) {
		where := fmt.Sprintf("docs/operations.md:%d", row.line)
		if len(row.keys) == 0 {
			t.Errorf("%s: no setting named in backquotes", where)
			continue
		}
		var envs []string
		for _, k := range row.keys {
			s, ok := byKey[k]
			if !ok {
				t.Errorf("%s: %q is not a setting (see config.Settings)", where, k)
				continue
			}
			envs = append(envs, s.Env)
		}
		if len(envs) != len(row.keys) {
			continue
		}
		switch names := row.envNames; {
		case len(names) == 1 && strings.HasSuffix(names[0], "*"):
			prefix := strings.TrimSuffix(names[0], "*")
			for i, env := range envs {
				if !strings.HasPrefix(env, prefix) {
					t.Errorf("%s: %s's environment variable is %s, which %s does not cover", where, row.keys[i], env, names[0])
				}
			}
		case len(names) == len(envs):
			for i, env := range envs {
				if names[i] != env {
					t.Errorf("%s: %s's environment variable is %s, not %s", where, row.keys[i], env, names[i])
				}
			}
		default:
			t.Errorf("%s: the environment column %q must name %s, or one PREFIX_* that covers them", where, row.envCell, strings.Join(envs, ", "))
		}
	}
}

// TestOperationsConfigurationRows checks the table reader itself, so that a
// row it misreads cannot pass unchecked.
func TestOperationsConfigurationRows(t *testing.T) {
	t.Parallel()
	var found bool
	for _, row := range opsConfigRows(t) {
		if len(row.keys) == 3 && row.keys[0] == "etcd.embedded.data_dir" {
			found = true
			if row.keys[1] != "etcd.embedded.client_url" || row.keys[2] != "etcd.embedded.peer_url" {
				t.Errorf("continued keys read as %q", row.keys)
			}
		}
	}
	if !found {
		t.Error("the etcd.embedded row (with continued keys) was not read")
	}
}
