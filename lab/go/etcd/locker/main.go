// Command lw-etcd-locker is a lock client independent of leaderwatch, used by the tests to
// check the lock canary's figures: the client dlock would use, Go's clientv3 with
// concurrency.NewSession and concurrency.NewMutex, unchanged.
//
// -holders sessions (each a lease of -ttl seconds, kept alive by clientv3) contend for the
// mutex -prefix: each Lock, holds -hold, Unlock, and asks again at once, until SIGTERM or
// SIGINT (or -for). With -op-timeout > 0 every unary call (the grant Txn, the Gets, the
// Delete) gets that deadline through a gRPC interceptor, as the lock canary gives its ops;
// a failed Lock or Unlock is tried again with the same session (the same key), as Mutex
// allows. With -op-timeout 0 the calls run on clientv3's defaults: a call sent to a member
// that lost its leader waits for the server's own request timeout.
//
// Each event is one CSV line on stdout: holder, event (granted, released, lock_failed,
// unlock_failed, session_lost, session), at (RFC 3339, UTC, nanoseconds), revision (the
// answer's header revision), token (the key's create revision), error on one line.
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

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

type event struct {
	holder   int
	kind     string
	at       time.Time
	rev, tok int64
	err      error
}

func main() {
	endpoints := flag.String("endpoints", "", "comma-separated client URLs of every member")
	prefix := flag.String("prefix", "__leaderwatch/independent-lock", "the mutex's prefix")
	holders := flag.Int("holders", 3, "sessions contending for the mutex")
	ttl := flag.Int("ttl", 10, "each session's lease TTL, seconds")
	hold := flag.Duration("hold", 100*time.Millisecond, "how long a holder keeps the lock")
	opTimeout := flag.Duration("op-timeout", time.Second, "deadline of each unary call (0: clientv3's defaults)")
	runFor := flag.Duration("for", 0, "stop after this long (0: at SIGTERM or SIGINT)")
	endpointsFile := flag.String("endpoints-file", "", "a file of client URLs (comma or newline separated), re-read every 500 ms: the members' addresses as they change (a replaced pod gets a new one)")
	flag.Parse()
	if *endpoints == "" || *holders <= 0 || *ttl <= 0 || *hold < 0 || *opTimeout < 0 {
		fmt.Fprintln(os.Stderr, "lw-etcd-locker: -endpoints is required; -holders and -ttl must be > 0")
		os.Exit(2)
	}
	cfg := clientv3.Config{
		Endpoints:   strings.Split(*endpoints, ","),
		DialTimeout: 2 * time.Second,
		Logger:      zap.NewNop(),
	}
	if *opTimeout > 0 {
		t := *opTimeout
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				octx, cancel := context.WithTimeout(ctx, t)
				defer cancel()
				return invoker(octx, method, req, reply, cc, opts...)
			})}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lw-etcd-locker: %v\n", err)
		os.Exit(1)
	}
	defer cli.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if *endpointsFile != "" {
		go follow(ctx, cli, *endpointsFile)
	}
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *runFor)
		defer cancel()
	}

	events := make(chan event, 1024)
	var printed sync.WaitGroup
	printed.Add(1)
	go func() {
		defer printed.Done()
		w := csv.NewWriter(os.Stdout)
		_ = w.Write([]string{"holder", "event", "at", "revision", "token", "error"})
		for e := range events {
			msg := ""
			if e.err != nil {
				msg = strings.ReplaceAll(e.err.Error(), "\n", " ")
			}
			_ = w.Write([]string{strconv.Itoa(e.holder), e.kind, e.at.UTC().Format(time.RFC3339Nano),
				strconv.FormatInt(e.rev, 10), strconv.FormatInt(e.tok, 10), msg})
			w.Flush()
		}
	}()

	var wg sync.WaitGroup
	for h := 0; h < *holders; h++ {
		wg.Add(1)
		go func(h int) {
			defer wg.Done()
			holder(ctx, cli, h, *prefix, *ttl, *hold, events)
		}(h)
	}
	wg.Wait()
	close(events)
	printed.Wait()
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, _ = cli.Delete(dctx, *prefix+"/", clientv3.WithPrefix())
	cancel()
}

// holder runs sessions one after another: on each, Lock, hold, Unlock, again, until the
// session is lost or ctx ends.
func holder(ctx context.Context, cli *clientv3.Client, h int, prefix string, ttl int, hold time.Duration, out chan<- event) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			out <- event{holder: h, kind: "lock_failed", at: time.Now(), err: err}
			time.Sleep(500 * time.Millisecond)
			continue
		}
		out <- event{holder: h, kind: "session", at: time.Now(), rev: int64(s.Lease())}
		hold1(ctx, s, h, prefix, hold, out)
		select {
		case <-s.Done():
			// A session ended by the stop is not lost.
			if ctx.Err() == nil {
				out <- event{holder: h, kind: "session_lost", at: time.Now()}
			}
		default:
		}
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = cli.Revoke(cctx, s.Lease())
		cancel()
	}
}

// hold1 takes and gives back the lock on session s until it is lost or ctx ends.
func hold1(ctx context.Context, s *concurrency.Session, h int, prefix string, hold time.Duration, out chan<- event) {
	m := concurrency.NewMutex(s, prefix)
	for {
		for {
			if ctx.Err() != nil {
				return
			}
			select {
			case <-s.Done():
				return
			default:
			}
			lctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-s.Done():
				case <-lctx.Done():
				}
				cancel()
			}()
			err := m.Lock(lctx)
			cancel()
			if err == nil {
				break
			}
			out <- event{holder: h, kind: "lock_failed", at: time.Now(), err: err}
		}
		// The fencing token: the key's create revision, which IsOwner compares against.
		tok := int64(0)
		if c, ok := m.IsOwner().TargetUnion.(*etcdserverpb.Compare_CreateRevision); ok {
			tok = c.CreateRevision
		}
		out <- event{holder: h, kind: "granted", at: time.Now(), rev: m.Header().Revision, tok: tok}
		select {
		case <-time.After(hold):
		case <-s.Done():
			return
		case <-ctx.Done():
			return
		}
		key := m.Key()
		for {
			// Unlock forgets the key once it succeeds; keep it to try again.
			if err := m.Unlock(ctx); err == nil {
				out <- event{holder: h, kind: "released", at: time.Now(), tok: tok}
				break
			} else if ctx.Err() != nil {
				return
			} else {
				out <- event{holder: h, kind: "unlock_failed", at: time.Now(), err: fmt.Errorf("%s: %w", key, err)}
			}
			select {
			case <-s.Done():
				return
			default:
			}
		}
	}
}

// follow re-reads path every 500 ms and hands the client its endpoints when they change,
// as an operator's client would learn a replaced member's new address.
func follow(ctx context.Context, cli *clientv3.Client, path string) {
	last := ""
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		var eps []string
		for _, f := range strings.FieldsFunc(string(b), func(r rune) bool { return r == ',' || r == '\n' }) {
			if f = strings.TrimSpace(f); f != "" {
				eps = append(eps, f)
			}
		}
		if now := strings.Join(eps, ","); len(eps) > 0 && now != last {
			cli.SetEndpoints(eps...)
			last = now
		}
	}
}
