/* CHECK for the C unit tests: a false condition is printed with its file and line and
 * counted in `failures`, and the test goes on (main reports the count). */
#ifndef CUNUMPY_TESTS_C_CHECK_H
#define CUNUMPY_TESTS_C_CHECK_H

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);              \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif /* CUNUMPY_TESTS_C_CHECK_H */
