package protocol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkTransactionalProduce produces 100-byte records through franz-go to an
// in-process broker: idempotently (the baseline), and in transactions of 1, 10 and 100
// records, each committed before the next begins. b.N is the number of records; compare
// the records/s of each to the baseline's.
func BenchmarkTransactionalProduce(b *testing.B) {
	b.Run("idempotent", func(b *testing.B) {
		tb := startTxnBroker(b)
		tb.createTopic("bench", 1, nil)
		cl := tb.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0))
		benchTxn(b, cl, 0)
	})
	for _, per := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("records-per-txn=%d", per), func(b *testing.B) {
			tb := startTxnBroker(b)
			tb.createTopic("bench", 1, nil)
			cl := tb.client(kgo.DefaultProduceTopic("bench"), kgo.ProducerLinger(0),
				kgo.TransactionalID(fmt.Sprintf("bench-%d", per)))
			benchTxn(b, cl, per)
		})
	}
}

// benchTxn produces b.N records, per to a transaction (0: no transactions), waiting for
// each transaction's records before committing it.
func benchTxn(b *testing.B, cl *kgo.Client, per int) {
	ctx := context.Background()
	value := make([]byte, 100)
	// Warm up: the producer id and the connections.
	if per > 0 {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		b.Fatal(err)
	}
	if per > 0 {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(value)))
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(max(per, 1), b.N-done)
		if per == 0 {
			n = min(100, b.N-done)
		}
		if per > 0 {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Value: value}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		if per > 0 {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				b.Fatal(err)
			}
		}
		done += n
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
}
