// Package partition holds one partition replica on one broker: its log, log end offset,
// high watermark, log start offset, leader epoch and the epoch cache, the idempotent
// producer state, and the fetch waiters that wake on append or high-watermark advance.
//
// A Manager owns every replica on a broker and opens, creates and deletes their logs.
package partition
