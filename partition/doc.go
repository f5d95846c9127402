// Package partition holds one partition replica on one broker: its log, log end offset,
// high watermark, log start offset, leader epoch and the epoch cache, the producer state
// (idempotence, and transactions with the last stable offset they hold read_committed
// consumers at), and the fetch waiters that wake on append or high-watermark advance.
//
// A Manager owns every replica on a broker and opens, creates and deletes their logs.
package partition
