/* The same kernel tests with the radix sort's top pass forced onto its private-copy path, the
 * path a sort falls back to when another thread changes the keys between count and scatter. */
#define CN_SORT_FORCE_COPY 1
#include "test_algorithms.c"
