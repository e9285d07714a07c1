// <cooperative_groups/reduce.h> under CPU emulation: cg::reduce over a thread_block_tile or a
// coalesced_group with cg::plus, cg::less (minimum), cg::greater (maximum), cg::bit_and,
// cg::bit_or, cg::bit_xor or any callable. Every thread of the group receives the result.
// A full tile folds in log2(N) butterfly steps; a partial tile or a coalesced group folds
// its lanes in rank order.
#ifndef CUNUMPY_EMU_COOPERATIVE_GROUPS_REDUCE_H
#define CUNUMPY_EMU_COOPERATIVE_GROUPS_REDUCE_H

#include <cooperative_groups.h>

namespace cooperative_groups {

template <typename T> struct plus {
    T operator()(const T &a, const T &b) const { return a + b; }
};
template <typename T> struct less {
    T operator()(const T &a, const T &b) const { return b < a ? b : a; }
};
template <typename T> struct greater {
    T operator()(const T &a, const T &b) const { return a < b ? b : a; }
};
template <typename T> struct bit_and {
    T operator()(const T &a, const T &b) const { return a & b; }
};
template <typename T> struct bit_or {
    T operator()(const T &a, const T &b) const { return a | b; }
};
template <typename T> struct bit_xor {
    T operator()(const T &a, const T &b) const { return a ^ b; }
};

template <typename Group, typename T, typename Op> static __inline__ T reduce(const Group &group, T value, Op op)
{
    const unsigned int mask = group.cunumpy_emu_mask();
    if (group.cunumpy_emu_full()) {
        for (unsigned int d = group.size() / 2u; d > 0u; d >>= 1)
            value = op(value, __shfl_xor_sync(mask, value, (int)d, (int)group.size()));
        return value;
    }
    T result = value;
    bool first = true;
    for (unsigned int m = mask; m != 0u; m &= m - 1u) {
        const T other = __shfl_sync(mask, value, __builtin_ctz(m));
        result = first ? other : op(result, other);
        first = false;
    }
    return result;
}

} // namespace cooperative_groups

#endif
