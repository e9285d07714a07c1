// <cooperative_groups.h> under CPU emulation: a subset of CUDA's cooperative groups, built on
// the prelude's barrier and warp primitives (so kernels using it run in fiber mode).
//
//   this_thread_block()      sync, thread_rank, size/num_threads, group_index, thread_index,
//                            group_dim/dim_threads
//   tiled_partition<N>(g)    N in 1, 2, 4, ..., 32, of a block or of a larger tile: sync,
//                            thread_rank, size/num_threads, meta_group_rank/size, shfl,
//                            shfl_up, shfl_down, shfl_xor, any, all, ballot. The tile's mask
//                            leaves out lanes past the end of a partial last warp.
//   coalesced_threads()      the active lanes of the warp at the call: sync, thread_rank,
//                            size/num_threads, shfl (by rank), any, all, ballot
//   this_grid()              thread_rank, size/num_threads, block_rank, num_blocks, is_valid
//                            (false: no cooperative launch); sync() is an error, since a grid-
//                            wide barrier needs a cooperative launch, which the emulation
//                            does not provide
//   cg::sync(g)              g.sync()
//   tiled_partition<N>(g)    N in 64, 128, ..., 1024 (tiles larger than a warp): sync (a
//                            block barrier: every tile of the block must reach it, as the
//                            CUDA samples' tiles do), thread_rank, size/num_threads,
//                            meta_group_rank/size
//   block_tile_memory<...>   the scratch type of large tiles (also cg::experimental::); an
//                            empty type here: this_thread_block(scratch) is this_thread_block()
//   labeled_partition(g, l)  of a coalesced group or a tile of up to 32 threads: the lanes with
//                            the same label (a coalesced group); binary_partition(g, pred)
// Not provided: tiled_partition(parent, n) with a run-time size, shuffles and cg::reduce on
// tiles larger than a warp, multi-grid groups, cluster groups, memcpy_async,
// cg::inclusive_scan.
#ifndef CUNUMPY_EMU_COOPERATIVE_GROUPS_H
#define CUNUMPY_EMU_COOPERATIVE_GROUPS_H

// Built on the prelude (included first in every emulated unit, so this is a no-op there): the
// headers beside it depend on the prelude, never the other way round.
#include <cunumpy_emu/prelude.h>

namespace cooperative_groups {

namespace details {
CUNUMPY_EMU_BUILTIN unsigned int linear_thread()
{
    return ::cunumpy_emu::runtime_load(&::cunumpy_emu::runtime_load(&::cunumpy_emu::worker()->current)->linear);
}
static __inline__ unsigned int block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
// The lanes of the calling thread's warp that exist (a block's last warp may be partial).
static __inline__ unsigned int warp_lanes()
{
    const unsigned int base = linear_thread() & ~31u, left = block_threads() - base;
    return left >= 32u ? 0xffffffffu : (1u << left) - 1u;
}
// Lane of the rank-th set bit of mask (rank < popcount(mask)).
static __inline__ int lane_of_rank(unsigned int mask, unsigned int rank)
{
    for (; rank != 0u; --rank)
        mask &= mask - 1u;
    return __builtin_ctz(mask);
}
// The bits of value at the set positions of mask, packed from bit 0 up.
static __inline__ unsigned int gather_bits(unsigned int value, unsigned int mask)
{
    unsigned int out = 0, bit = 1u;
    for (; mask != 0u; mask &= mask - 1u, bit <<= 1)
        if (value & (mask & (0u - mask)))
            out |= bit;
    return out;
}
} // namespace details

class thread_block {
  public:
    void sync() const { __syncthreads(); }
    unsigned int thread_rank() const { return details::linear_thread(); }
    unsigned int size() const { return details::block_threads(); }
    unsigned int num_threads() const { return details::block_threads(); }
    dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    dim3 group_dim() const { return dim3(blockDim.x, blockDim.y, blockDim.z); }
    dim3 dim_threads() const { return group_dim(); }
};

static __inline__ thread_block this_thread_block() { return thread_block(); }

// The scratch memory CUDA's large tiles use (cg::block_tile_memory<MaxBlockSize> in CUDA 12,
// <TileCommunicationSize, MaxBlockSize> in CUDA 11): nothing is needed here.
template <unsigned int A = 1024, unsigned int B = 0> struct block_tile_memory {
    unsigned char cunumpy_emu_unused;
};

template <unsigned int A, unsigned int B> static __inline__ thread_block this_thread_block(block_tile_memory<A, B> &)
{
    return thread_block();
}

namespace details {
// A tile of N > 32 consecutive threads (by linear index): whole warps; sync() is a block barrier.
template <unsigned int N> class large_tile {
    static_assert(N <= 1024 && (N & (N - 1)) == 0, "tiled_partition<N>: N must be a power of two up to 1024");

  protected:
    unsigned int rank_, meta_rank_, meta_size_;

  public:
    large_tile(unsigned int parent_rank, unsigned int parent_size)
        : rank_(parent_rank % N), meta_rank_(parent_rank / N), meta_size_((parent_size + N - 1u) / N)
    {
    }
    static constexpr unsigned int size() { return N; }
    static constexpr unsigned int num_threads() { return N; }
    unsigned int thread_rank() const { return rank_; }
    unsigned int meta_group_rank() const { return meta_rank_; }
    unsigned int meta_group_size() const { return meta_size_; }
    void sync() const { __syncthreads(); }
};
template <unsigned int N> class warp_tile;
} // namespace details

// A tile of N consecutive threads (by linear index): inside one warp for N <= 32.
template <unsigned int N, typename Parent = void> class thread_block_tile;

template <unsigned int N>
class thread_block_tile<N, void>
    : public std::conditional_t<(N > 32u), details::large_tile<N>, details::warp_tile<N>> {
    using base = std::conditional_t<(N > 32u), details::large_tile<N>, details::warp_tile<N>>;

  public:
    thread_block_tile(unsigned int parent_rank, unsigned int parent_size) : base(parent_rank, parent_size) {}
};

template <unsigned int N> class details::warp_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiled_partition<N>: N must be 1, 2, 4, 8, 16 or 32");

  protected:
    unsigned int mask_;      // the tile's lanes in the warp that exist
    unsigned int first_;     // lane of the tile's rank 0
    unsigned int meta_rank_; // rank of the tile among the parent's tiles
    unsigned int meta_size_;

  public:
    warp_tile(unsigned int parent_rank, unsigned int parent_size)
    {
        const unsigned int lane = details::linear_thread() & 31u;
        first_ = lane & ~(N - 1u);
        const unsigned int bits = N == 32u ? 0xffffffffu : ((1u << N) - 1u) << first_;
        mask_ = bits & details::warp_lanes();
        meta_rank_ = parent_rank / N;
        meta_size_ = (parent_size + N - 1u) / N;
    }
    static constexpr unsigned int size() { return N; }
    static constexpr unsigned int num_threads() { return N; }
    unsigned int thread_rank() const { return (details::linear_thread() & 31u) - first_; }
    unsigned int meta_group_rank() const { return meta_rank_; }
    unsigned int meta_group_size() const { return meta_size_; }
    void sync() const { __syncwarp(mask_); }

    template <typename T> T shfl(T var, int src_rank) const { return __shfl_sync(mask_, var, src_rank, (int)N); }
    template <typename T> T shfl_up(T var, unsigned int delta) const { return __shfl_up_sync(mask_, var, delta, (int)N); }
    template <typename T> T shfl_down(T var, unsigned int delta) const
    {
        return __shfl_down_sync(mask_, var, delta, (int)N);
    }
    template <typename T> T shfl_xor(T var, int lane_mask) const { return __shfl_xor_sync(mask_, var, lane_mask, (int)N); }
    int any(int predicate) const { return __any_sync(mask_, predicate); }
    int all(int predicate) const { return __all_sync(mask_, predicate); }
    unsigned int ballot(int predicate) const { return __ballot_sync(mask_, predicate) >> first_; }

    // For cg::reduce: the warp lanes of this tile, and whether all N exist.
    unsigned int cunumpy_emu_mask() const { return mask_; }
    bool cunumpy_emu_full() const { return mask_ == (N == 32u ? 0xffffffffu : ((1u << N) - 1u) << first_); }
};

template <unsigned int N, typename Parent> class thread_block_tile : public thread_block_tile<N, void> {
  public:
    thread_block_tile(unsigned int parent_rank, unsigned int parent_size)
        : thread_block_tile<N, void>(parent_rank, parent_size)
    {
    }
};

template <unsigned int N> static __inline__ thread_block_tile<N, thread_block> tiled_partition(const thread_block &parent)
{
    return thread_block_tile<N, thread_block>(parent.thread_rank(), parent.size());
}

template <unsigned int N, unsigned int M, typename P>
static __inline__ thread_block_tile<N, thread_block_tile<M, P>> tiled_partition(const thread_block_tile<M, P> &parent)
{
    static_assert(N <= M, "tiled_partition<N>(tile<M>): N must not exceed M");
    return thread_block_tile<N, thread_block_tile<M, P>>(parent.thread_rank(), M);
}

// The lanes of the warp active at the call (grouped by call site, as __activemask()).
class coalesced_group {
    unsigned int mask_;

  public:
    explicit coalesced_group(unsigned int mask) : mask_(mask) {}
    unsigned int size() const { return (unsigned int)__builtin_popcount(mask_); }
    unsigned int num_threads() const { return size(); }
    unsigned int thread_rank() const
    {
        const unsigned int lane = details::linear_thread() & 31u;
        return (unsigned int)__builtin_popcount(mask_ & ((1u << lane) - 1u));
    }
    unsigned int meta_group_rank() const { return 0; }
    unsigned int meta_group_size() const { return 1; }
    void sync() const { __syncwarp(mask_); }
    template <typename T> T shfl(T var, unsigned int src_rank) const
    {
        return __shfl_sync(mask_, var, details::lane_of_rank(mask_, src_rank % size()));
    }
    int any(int predicate) const { return __any_sync(mask_, predicate); }
    int all(int predicate) const { return __all_sync(mask_, predicate); }
    unsigned int ballot(int predicate) const { return details::gather_bits(__ballot_sync(mask_, predicate), mask_); }

    unsigned int cunumpy_emu_mask() const { return mask_; }
    bool cunumpy_emu_full() const { return false; }
};

// The lanes of group g with the same label: a coalesced group (__match_any_sync).
template <typename T> static __inline__ coalesced_group labeled_partition(const coalesced_group &g, T label)
{
    return coalesced_group(__match_any_sync(g.cunumpy_emu_mask(), label));
}
template <typename T, unsigned int N, typename P>
static __inline__ coalesced_group labeled_partition(const thread_block_tile<N, P> &g, T label)
{
    static_assert(N <= 32u, "labeled_partition: tiles of up to 32 threads");
    return coalesced_group(__match_any_sync(g.cunumpy_emu_mask(), label));
}
template <typename Group> static __inline__ coalesced_group binary_partition(const Group &g, bool predicate)
{
    return labeled_partition(g, (int)predicate);
}

// Inlined so that __activemask() sees the caller's call site.
static __inline__ __attribute__((always_inline)) coalesced_group coalesced_threads()
{
    return coalesced_group(__activemask());
}

class grid_group {
  public:
    [[noreturn]] void sync() const
    {
        cunumpy_emu_trap("this_grid().sync(): a grid-wide barrier needs a cooperative launch, which the CPU "
                         "emulation does not provide");
    }
    bool is_valid() const { return false; }
    unsigned long long num_blocks() const { return (unsigned long long)gridDim.x * gridDim.y * gridDim.z; }
    unsigned long long block_rank() const
    {
        return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
    }
    unsigned long long num_threads() const { return num_blocks() * details::block_threads(); }
    unsigned long long size() const { return num_threads(); }
    unsigned long long thread_rank() const { return block_rank() * details::block_threads() + details::linear_thread(); }
    dim3 block_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    dim3 dim_blocks() const { return dim3(gridDim.x, gridDim.y, gridDim.z); }
};

static __inline__ grid_group this_grid() { return grid_group(); }

template <typename Group> static __inline__ void sync(const Group &g) { g.sync(); }

// CUDA 11 spelled the large-tile API cg::experimental::.
namespace experimental {
using ::cooperative_groups::block_tile_memory;
using ::cooperative_groups::this_thread_block;
using ::cooperative_groups::tiled_partition;
} // namespace experimental

} // namespace cooperative_groups

#endif
