package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Store is the "storage backend" of the attacher: which nodes each volume
// is published to, one file a volume, <root>/.published/<volumeHandle>,
// holding node names one a line. It lives in the shared root, so it
// outlives the attacher's pod (and any node).
type Store struct {
	Root string
}

func (s Store) path(handle string) (string, error) {
	if err := ValidHandle(handle); err != nil {
		return "", err
	}
	return filepath.Join(s.Root, ".published", handle), nil
}

// Read returns the nodes the volume is published to (none when the record
// does not exist).
func (s Store) Read(handle string) ([]string, error) {
	p, err := s.path(handle)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseRecord(data), nil
}

// Write replaces the volume's record atomically (a temporary file renamed
// over it); a volume published nowhere has no record file.
func (s Store) Write(handle string, nodes []string) error {
	p, err := s.path(handle)
	if err != nil {
		return err
	}
	data := FormatRecord(nodes)
	if len(data) == 0 {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+handle+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", p, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Handles lists the volumes that have a record, and removes the temporary
// files a write interrupted left (call it when no write is under way).
func (s Store) Handles() ([]string, error) {
	dir := filepath.Join(s.Root, ".published")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		if e.Type().IsRegular() && ValidHandle(name) == nil {
			out = append(out, name)
		}
	}
	return out, nil
}
