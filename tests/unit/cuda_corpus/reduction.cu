// Parallel reductions in the style of the CUDA samples' "reduction" (reduce0 ... reduce6) and
// its cooperative-groups variants: each block writes the sum of its part to out[blockIdx.x].
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

typedef float real_t;

// Interleaved addressing with divergent branching.
extern "C" __global__ void reduce0(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    cg::thread_block cta = cg::this_thread_block();
    extern __shared__ real_t sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0;
    cg::sync(cta);
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if ((tid % (2 * s)) == 0) sdata[tid] += sdata[tid + s];
        cg::sync(cta);
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// Interleaved addressing with a strided index and non-divergent branch.
extern "C" __global__ void reduce1(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    extern __shared__ real_t sdata[];
    uint tid = threadIdx.x;
    uint i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0;
    __syncthreads();
    for (uint s = 1; s < blockDim.x; s *= 2) {
        int index = 2 * s * tid;
        if (index < blockDim.x) sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// Sequential addressing.
extern "C" __global__ void reduce2(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    extern __shared__ real_t sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}

// First add during the global load: each block reduces 2 * blockDim.x elements.
extern "C" __global__ void reduce3(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    extern __shared__ real_t sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    real_t mySum = (i < n) ? g_idata[i] : 0;
    if (i + blockDim.x < n) mySum += g_idata[i + blockDim.x];
    sdata[tid] = mySum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = mySum;
}

// The last warp reduced with shuffles.
template <unsigned int blockSize>
__global__ void reduce4(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    cg::thread_block cta = cg::this_thread_block();
    __shared__ real_t sdata[blockSize];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    real_t mySum = (i < n) ? g_idata[i] : 0;
    if (i + blockSize < n) mySum += g_idata[i + blockSize];
    sdata[tid] = mySum;
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
        cg::sync(cta);
    }
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64) mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) mySum += tile32.shfl_down(mySum, offset);
    }
    if (cta.thread_rank() == 0) g_odata[blockIdx.x] = mySum;
}

// Completely unrolled with the block size as a template parameter.
template <unsigned int blockSize>
__global__ void reduce5(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    cg::thread_block cta = cg::this_thread_block();
    __shared__ real_t sdata[blockSize];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    real_t mySum = (i < n) ? g_idata[i] : 0;
    if (i + blockSize < n) mySum += g_idata[i + blockSize];
    sdata[tid] = mySum;
    cg::sync(cta);
    if ((blockSize >= 512) && (tid < 256)) sdata[tid] = mySum = mySum + sdata[tid + 256];
    cg::sync(cta);
    if ((blockSize >= 256) && (tid < 128)) sdata[tid] = mySum = mySum + sdata[tid + 128];
    cg::sync(cta);
    if ((blockSize >= 128) && (tid < 64)) sdata[tid] = mySum = mySum + sdata[tid + 64];
    cg::sync(cta);
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64) mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) mySum += tile32.shfl_down(mySum, offset);
    }
    if (cta.thread_rank() == 0) g_odata[blockIdx.x] = mySum;
}

// Many elements per thread (a grid-stride loop), then as reduce5.
template <unsigned int blockSize, bool nIsPow2>
__global__ void reduce6(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    cg::thread_block cta = cg::this_thread_block();
    __shared__ real_t sdata[blockSize];
    unsigned int tid = threadIdx.x;
    unsigned int gridSize = blockSize * gridDim.x;
    real_t mySum = 0;
    if (nIsPow2) {
        unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
        gridSize = gridSize << 1;
        while (i < n) {
            mySum += g_idata[i];
            if ((i + blockSize) < n) mySum += g_idata[i + blockSize];
            i += gridSize;
        }
    } else {
        unsigned int i = blockIdx.x * blockSize + threadIdx.x;
        while (i < n) {
            mySum += g_idata[i];
            i += gridSize;
        }
    }
    sdata[tid] = mySum;
    cg::sync(cta);
    if ((blockSize >= 512) && (tid < 256)) sdata[tid] = mySum = mySum + sdata[tid + 256];
    cg::sync(cta);
    if ((blockSize >= 256) && (tid < 128)) sdata[tid] = mySum = mySum + sdata[tid + 128];
    cg::sync(cta);
    if ((blockSize >= 128) && (tid < 64)) sdata[tid] = mySum = mySum + sdata[tid + 64];
    cg::sync(cta);
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64) mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) mySum += tile32.shfl_down(mySum, offset);
    }
    if (cta.thread_rank() == 0) g_odata[blockIdx.x] = mySum;
}

// cg::reduce over warp tiles, one partial sum per warp combined in shared memory.
template <unsigned int blockSize>
__global__ void cg_reduce(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(cta);
    __shared__ real_t warpSums[blockSize / 32];
    real_t mySum = 0;
    for (unsigned int i = blockIdx.x * blockSize + threadIdx.x; i < n; i += blockSize * gridDim.x) mySum += g_idata[i];
    mySum = cg::reduce(tile, mySum, cg::plus<real_t>());
    if (tile.thread_rank() == 0) warpSums[tile.meta_group_rank()] = mySum;
    cg::sync(cta);
    if (tile.meta_group_rank() == 0) {
        real_t v = tile.thread_rank() < tile.meta_group_size() ? warpSums[tile.thread_rank()] : 0;
        v = cg::reduce(tile, v, cg::plus<real_t>());
        if (tile.thread_rank() == 0) g_odata[blockIdx.x] = v;
    }
}

// Tiles larger than a warp, with the scratch memory CUDA asks for.
template <unsigned int blockSize>
__global__ void cg_reduce_multi_warp(const real_t *g_idata, real_t *g_odata, unsigned int n)
{
    __shared__ cg::block_tile_memory<blockSize> scratch;
    cg::thread_block cta = cg::this_thread_block(scratch);
    cg::thread_block_tile<64> tile = cg::tiled_partition<64>(cta);
    __shared__ real_t sdata[blockSize];
    __shared__ real_t tileSums[blockSize / 64];
    unsigned int tid = cta.thread_rank();
    real_t mySum = 0;
    for (unsigned int i = blockIdx.x * blockSize + tid; i < n; i += blockSize * gridDim.x) mySum += g_idata[i];
    sdata[tid] = mySum;
    tile.sync();
    for (unsigned int s = tile.size() / 2; s > 0; s >>= 1) {
        if (tile.thread_rank() < s) sdata[tid] += sdata[tid + s];
        tile.sync();
    }
    if (tile.thread_rank() == 0) tileSums[tile.meta_group_rank()] = sdata[tid];
    cg::sync(cta);
    if (tid == 0) {
        real_t total = 0;
        for (unsigned int t = 0; t < tile.meta_group_size(); t++) total += tileSums[t];
        g_odata[blockIdx.x] = total;
    }
}
