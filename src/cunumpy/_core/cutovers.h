/* Input sizes below which each host algorithm stays on the calling thread (cn_parallel_for_n).
 *
 * Below them, handing chunks to the workers costs more than the second thread saves; the
 * chunks, and so the results, are the same on either side. Measured with
 * `benchmarks/cutover.py` (1 against 2 threads, cut-overs ignored); the figures are in
 * benchmarks/README.md. An algorithm whose fixed chunks already keep small inputs in one chunk
 * has a cut-over of at least two chunks whatever is written here. */
#ifndef CUNUMPY__CORE_CUTOVERS_H
#define CUNUMPY__CORE_CUTOVERS_H

/* Pool dispatch costs about 5-10 us at best on the 2-core machine (philox of 16385 elements:
 * two chunks, the second of one element, 1 vs 2 threads, best of 400: +0 to +8 us). The
 * measurement was made under a load average of 5 to 6 on 2 cores (other developers' builds),
 * where a waiting worker is often not scheduled for milliseconds: the medians show 2 threads
 * slower at almost every size and the best times (ratios 1-thread / 2-thread below) are what
 * the choice rests on, rounded to whole chunks.
 *   philox_uniform: 30K 1.44, 70K 1.61, 150K 1.41, 300K 1.80        -> two chunks of 16384
 *   morton_keys:    30K 1.16, 70K 1.74, 150K 1.44                    -> two chunks of 16384
 *   morton_decode:  30K 0.96, 70K 1.49, 150K 1.40, 300K 1.26         -> four chunks of 16384
 *   cell_offsets:   70K 1.10 (6K in the 2nd chunk), 150K 1.67, 300K 1.68, 1M 1.31
 *   segment_boundaries: 70K 1.00 (idem), 150K 1.71, 300K 0.99, 1M 1.20 -> two chunks of 65536
 *   sort_by_key:    70K 0.86/1.11, 150K 0.50/1.65, 300K 0.92/0.79, 1M 1.18/0.91 (two runs):
 *                   not resolved under that load; two top-pass chunks of 65536 (the serial
 *                   sort of 131072 keys takes about 2.5 ms, 250 times the dispatch cost of
 *                   its five parallel passes)
 *   compact_by_mask: 70K 0.90, 150K 0.94, 300K 0.98, 1M 2.96       -> eight blocks of 32768
 *   segment_sum:    parts of at least 2**18 rows decide (a second part from 524288 rows; the
 *                   parts fix the sums' bits, so they are not a cut-over to tune): 1M 1.63 */
#define CN_SORT_CUTOVER ((size_t)1 << 17)
#define CN_RUNS_CUTOVER ((size_t)1 << 17)
#define CN_OFFSETS_CUTOVER ((size_t)1 << 17)
#define CN_SEGMENT_SUM_CUTOVER ((size_t)0)
#define CN_MORTON_KEYS_CUTOVER ((size_t)1 << 15)
#define CN_MORTON_DECODE_CUTOVER ((size_t)1 << 16) /* decode and encode */
#define CN_PHILOX_CUTOVER ((size_t)1 << 15)
#define CN_COMPACT_CUTOVER ((size_t)1 << 18)
/* The payload gathers of sort_by_key: random reads like the sort's scatter; its cut-over. */
#define CN_TAKE_CUTOVER CN_SORT_CUTOVER

#endif /* CUNUMPY__CORE_CUTOVERS_H */
