// lw-slowfs: the slow disk of `lw-lab fault disk`. A passthrough FUSE filesystem that
// mirrors BACKING at MOUNTPOINT, under one etcd member's volume; every fsync or fdatasync
// of a file waits the delay written in DELAY_FILE before the backing file is synced, so
// etcd's own timing of the call (its WAL fsync and backend commit histograms) sees it, as
// it would see a slow persistent disk. The delay is read again every 100 ms: the fault is
// set and undone while etcd runs, with no restart.
//
//	lw-slowfs BACKING MOUNTPOINT DELAY_FILE
//
// DELAY_FILE holds a Go duration ("50ms"); missing, empty or "0" is no delay. The process
// serves until SIGTERM or SIGINT, then unmounts.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// delay is the added fsync latency now, in nanoseconds.
var delay atomic.Int64

// node is the loopback node with a slow fsync; every node below the root is one too.
type node struct {
	fs.LoopbackNode
}

var _ = (fs.NodeFsyncer)((*node)(nil))

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	// The whole delay, even when the kernel interrupts the request (ctx done): a disk's
	// fsync cannot be interrupted, and etcd's bbolt takes an EINTR from fdatasync as
	// fatal (2026-12-06: a member exited with "failed to commit tx: interrupted system
	// call" once the Go runtime's preemption signal reached its syncing thread).
	if d := time.Duration(delay.Load()); d > 0 {
		time.Sleep(d)
	}
	if s, ok := f.(fs.FileFsyncer); ok && f != nil {
		return s.Fsync(ctx, flags)
	}
	// An fsync with no open handle: sync the backing file by its path.
	p := filepath.Join(n.RootData.Path, n.Path(nil))
	fd, err := syscall.Open(p, syscall.O_RDONLY, 0)
	if err != nil {
		return fs.ToErrno(err)
	}
	defer syscall.Close(fd)
	return fs.ToErrno(syscall.Fsync(fd))
}

func newNode(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
	return &node{LoopbackNode: fs.LoopbackNode{RootData: r}}
}

// readDelay parses DELAY_FILE; a missing file is no delay.
func readDelay(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil && d < 0 {
		err = fmt.Errorf("negative delay %q", s)
	}
	return d, err
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: lw-slowfs BACKING MOUNTPOINT DELAY_FILE")
		os.Exit(2)
	}
	backing, mnt, delayFile := os.Args[1], os.Args[2], os.Args[3]
	d, err := readDelay(delayFile)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lw-slowfs: %s: %v\n", delayFile, err)
		os.Exit(2)
	}
	delay.Store(int64(d))
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		fmt.Fprintf(os.Stderr, "lw-slowfs: %s: %v\n", backing, err)
		os.Exit(2)
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev), NewNode: newNode}
	rootNode := newNode(root, nil, "", &st)
	root.RootNode = rootNode
	server, err := fs.Mount(mnt, rootNode, &fs.Options{
		MountOptions: fuse.MountOptions{
			// The kubelet and the container (root in the host's user namespace, like
			// this process) reach it; the kernel checks the mode bits, as on a disk.
			AllowOther:  true,
			DirectMount: true,
			FsName:      "lw-slowfs:" + backing,
			Name:        "lw-slowfs",
			Options:     []string{"default_permissions"},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lw-slowfs: mount %s: %v\n", mnt, err)
		os.Exit(1)
	}
	go func() {
		for range time.Tick(100 * time.Millisecond) {
			if d, err := readDelay(delayFile); err == nil {
				delay.Store(int64(d))
			}
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		_ = server.Unmount()
	}()
	server.Wait()
}
