/* Integer key types of the sort and segment kernels, and the switch that compiles a loop once
 * per key type. Pure C (no Python), shared by sort_kernels.h, segment_kernels.h and tests/c. */
#ifndef CUNUMPY__CORE_KEY_TYPES_H
#define CUNUMPY__CORE_KEY_TYPES_H

#include <stddef.h>

/* 8 and 16-bit keys (bool as uint8) are read in place by the kernels, never widened first.
 * The values are arbitrary (no kernel compares them); these keep segment_kernels.h's per-key
 * switches compiling as before the sort and segment kernels shared the type. */
typedef enum { CN_KEY_I32 = 0, CN_KEY_I64 = 1, CN_KEY_U64 = 2, CN_KEY_I8 = 3, CN_KEY_U8 = 4,
               CN_KEY_I16 = 5, CN_KEY_U16 = 6, CN_KEY_U32 = 7 } cn_key_type;

static inline size_t cn_key_size(cn_key_type t)
{
    switch (t) {
    case CN_KEY_I8: case CN_KEY_U8: return 1;
    case CN_KEY_I16: case CN_KEY_U16: return 2;
    case CN_KEY_I32: case CN_KEY_U32: return 4;
    default: return 8;
    }
}

/* The key type of isz-byte integers; any size other than 1, 2 or 4 counts as 8. */
static inline cn_key_type cn_key_type_of(size_t isz, int is_unsigned)
{
    switch (isz) {
    case 1: return is_unsigned ? CN_KEY_U8 : CN_KEY_I8;
    case 2: return is_unsigned ? CN_KEY_U16 : CN_KEY_I16;
    case 4: return is_unsigned ? CN_KEY_U32 : CN_KEY_I32;
    default: return is_unsigned ? CN_KEY_U64 : CN_KEY_I64;
    }
}

/* Expand M(SUF, X) for the key type t, SUF its suffix (i8 ... u64): a per-element loop is
 * then compiled once per type (a switch inside the loop costs a fifth of a sort pass). X is
 * passed through (a name prefix, a record kind); M may end in a return. */
#define CN_KEY_DISPATCH_X(t, M, X)                                                                 \
    switch (t) {                                                                                   \
    case CN_KEY_I32: M(i32, X); break;                                                             \
    case CN_KEY_U32: M(u32, X); break;                                                             \
    case CN_KEY_I64: M(i64, X); break;                                                             \
    case CN_KEY_I8: M(i8, X); break;                                                               \
    case CN_KEY_U8: M(u8, X); break;                                                               \
    case CN_KEY_I16: M(i16, X); break;                                                             \
    case CN_KEY_U16: M(u16, X); break;                                                             \
    default: M(u64, X); break;                                                                     \
    }
/* The same for an M(SUF) of one argument. */
#define CN_KEY_DISPATCH_ONE_(SUF, M) M(SUF)
#define CN_KEY_DISPATCH(t, M) CN_KEY_DISPATCH_X(t, CN_KEY_DISPATCH_ONE_, M)

#endif /* CUNUMPY__CORE_KEY_TYPES_H */
