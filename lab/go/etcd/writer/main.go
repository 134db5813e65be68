// Command lw-etcd-writer is an etcd client independent of leaderwatch, used by the tests
// to check the canary's figures: Go's clientv3 (the client most etcd users run) rather than
// leaderwatch's Rust client, its own balancer and its own retry rules.
//
// Every -every it starts one Put of -key with a deadline of -timeout, never waiting for the
// earlier ones, on one client that knows every endpoint. Each op finished is one CSV line
// on stdout: started and done (RFC 3339, UTC, nanoseconds), ok (true/false), the error on
// one line. It runs until SIGTERM or SIGINT (or -for), then deletes the key.
package main

import (
	"context"
	"encoding/csv"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type op struct {
	started, done time.Time
	err           error
}

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated client URLs of every member")
	key := flag.String("key", "__leaderwatch/independent-writer", "the key every op puts")
	every := flag.Duration("every", 50*time.Millisecond, "a new op this often")
	timeout := flag.Duration("timeout", 500*time.Millisecond, "deadline of each op")
	runFor := flag.Duration("for", 0, "stop after this long (0: at SIGTERM or SIGINT)")
	flag.Parse()
	if *endpoints == "" || *every <= 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "lw-etcd-writer: -endpoints is required; -every and -timeout must be > 0")
		os.Exit(2)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lw-etcd-writer: %v\n", err)
		os.Exit(1)
	}
	defer cli.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}

	done := make(chan op, 1024)
	var printed sync.WaitGroup
	printed.Add(1)
	go func() {
		defer printed.Done()
		w := csv.NewWriter(os.Stdout)
		_ = w.Write([]string{"started", "done", "ok", "error"})
		for o := range done {
			msg := ""
			if o.err != nil {
				msg = strings.ReplaceAll(o.err.Error(), "\n", " ")
			}
			_ = w.Write([]string{o.started.UTC().Format(time.RFC3339Nano), o.done.UTC().Format(time.RFC3339Nano), strconv.FormatBool(o.err == nil), msg})
			w.Flush()
		}
	}()

	var inFlight sync.WaitGroup
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			inFlight.Wait()
			close(done)
			printed.Wait()
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = cli.Delete(dctx, *key)
			cancel()
			return
		case <-tick.C:
		}
		inFlight.Add(1)
		go func(n int) {
			defer inFlight.Done()
			started := time.Now()
			octx, cancel := context.WithTimeout(context.Background(), *timeout)
			_, err := cli.Put(octx, *key, strconv.Itoa(n))
			cancel()
			done <- op{started, time.Now(), err}
		}(n)
	}
}
