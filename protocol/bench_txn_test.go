package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
)

// BenchmarkTransactionalProduce compares franz-go's transactional producer, committing
// every 1, 10 or 100 records, with its idempotent producer flushing as often, against an
// in-process broker with its transaction coordinator (acks=all, one partition, 100-byte
// values). b.N is the number of records; records/s is reported. A transaction costs the
// coordinator's Raft commits (AddPartitionsToTxn, EndTxn's decision and completion) and
// the partition's marker and verification, which the per-record cost amortizes. The
// producer's next transaction usually meets CONCURRENT_TRANSACTIONS while the markers of
// the last are being written, as against Kafka; franz-go's default 20 ms backoff for it
// would be most of what is measured, so it backs off 1 ms here.
func BenchmarkTransactionalProduce(b *testing.B) {
	for _, per := range []int{1, 10, 100} {
		for _, transactional := range []bool{false, true} {
			kind := "idempotent"
			if transactional {
				kind = "transactional"
			}
			b.Run(fmt.Sprintf("records=%d/%s", per, kind), func(b *testing.B) {
				gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
				tcfg := txn.Config{NodeID: 1, Logger: quietLogger()}
				tb := launchTxn(b, b.TempDir(), nil, brokerConfig(), &gcfg, &tcfg)
				tb.createTopic("bench", 1, nil)
				opts := []kgo.Opt{kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression())}
				if transactional {
					opts = append(opts, kgo.TransactionalID("bench"), kgo.TransactionTimeout(time.Minute), kgo.ConcurrentTransactionsBackoff(time.Millisecond))
				}
				cl := tb.client(opts...)
				ctx := context.Background()
				value := make([]byte, 100)
				b.ResetTimer()
				start := time.Now()
				for done := 0; done < b.N; {
					n := min(per, b.N-done)
					if transactional {
						if err := cl.BeginTransaction(); err != nil {
							b.Fatal(err)
						}
					}
					for range n {
						cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
							if err != nil {
								b.Error(err)
							}
						})
					}
					if err := cl.Flush(ctx); err != nil {
						b.Fatal(err)
					}
					if transactional {
						if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
							b.Fatal(err)
						}
					}
					done += n
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
			})
		}
	}
}
