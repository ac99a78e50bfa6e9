package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStoreWritesReadsAndRemovesRecords(t *testing.T) {
	s := Store{Root: t.TempDir()}
	if got, err := s.Read("vol1"); err != nil || got != nil {
		t.Fatalf("no record: got %v, %v", got, err)
	}
	if err := s.Write("vol1", []string{"w2", "w1"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.Root, ".published", "vol1"))
	if err != nil || string(data) != "w1\nw2\n" {
		t.Fatalf("the record file holds %q (%v)", data, err)
	}
	if got, err := s.Read("vol1"); err != nil || !reflect.DeepEqual(got, []string{"w1", "w2"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := s.Write("vol1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root, ".published", "vol1")); !os.IsNotExist(err) {
		t.Fatalf("an empty record still has a file: %v", err)
	}
	if err := s.Write("vol1", nil); err != nil {
		t.Fatalf("emptying an empty record: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(s.Root, ".published"))
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if err := s.Write("../x", []string{"w1"}); err == nil {
		t.Fatal("an invalid handle was written")
	}
}

func TestStoreHandlesListsRecordsAndDropsLeftTemporaryFiles(t *testing.T) {
	s := Store{Root: t.TempDir()}
	if h, err := s.Handles(); err != nil || h != nil {
		t.Fatalf("no records: %v, %v", h, err)
	}
	for _, h := range []string{"vol2", "vol1"} {
		if err := s.Write(h, []string{"w1"}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(s.Root, ".published")
	if err := os.WriteFile(filepath.Join(dir, ".vol1.tmp-123"), []byte("w9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := s.Handles()
	if err != nil || !reflect.DeepEqual(h, []string{"vol1", "vol2"}) {
		t.Fatalf("got %v, %v", h, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".vol1.tmp-123")); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is still there: %v", err)
	}
}
