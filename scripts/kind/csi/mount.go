package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MountPoints parses a mountinfo file (proc(5)): the mount point of every
// line, the fifth field, with its octal escapes (\040 for a space, ...)
// undone. A line with fewer fields is an error.
func MountPoints(mountinfo []byte) ([]string, error) {
	var out []string
	for i, line := range strings.Split(string(mountinfo), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 10 {
			return nil, fmt.Errorf("mountinfo line %d has %d fields: %q", i+1, len(f), line)
		}
		out = append(out, unescapeOctal(f[4]))
	}
	return out, nil
}

// IsMountPoint says whether path is a mount point in mountinfo.
func IsMountPoint(mountinfo []byte, path string) (bool, error) {
	points, err := MountPoints(mountinfo)
	if err != nil {
		return false, err
	}
	path = filepath.Clean(path)
	for _, p := range points {
		if p == path {
			return true, nil
		}
	}
	return false, nil
}

func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			n, _ := strconv.ParseUint(s[i+1:i+4], 8, 8)
			b.WriteByte(byte(n))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// Mounter does the node's mounts with system calls (the image has no
// mount binary), reading mount points from a mountinfo file.
type Mounter struct {
	Mountinfo string // /proc/self/mountinfo
}

// Mounted says whether path is a mount point.
func (m Mounter) Mounted(path string) (bool, error) {
	data, err := os.ReadFile(m.Mountinfo)
	if err != nil {
		return false, err
	}
	return IsMountPoint(data, path)
}

// Bind bind-mounts src onto dst, then makes the bind read-only when asked
// (a bind mount takes its flags from a remount).
func (m Mounter) Bind(src, dst string, readOnly bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s on %s: %w", src, dst, err)
	}
	if readOnly {
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(dst, 0)
			return fmt.Errorf("remounting %s read-only: %w", dst, err)
		}
	}
	return nil
}

// Unmount unmounts path as long as it is a mount point (mounts stacked
// there by repeated calls included); not a mount point is not an error.
func (m Mounter) Unmount(path string) error {
	for range 16 {
		mounted, err := m.Mounted(path)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(path, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmounting %s: %w", path, err)
		}
	}
	return fmt.Errorf("%s is still a mount point after 16 unmounts", path)
}
