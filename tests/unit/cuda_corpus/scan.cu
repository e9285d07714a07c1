// Prefix sums in the style of the CUDA samples' "scan" and "shfl_scan": a block-wide
// Hillis-Steele scan, a work-efficient (Blelloch) scan, a warp-shuffle scan and the uniform
// add that turns per-block scans into a global one.
#define NUM_BANKS 32
#define LOG_NUM_BANKS 5

// Inclusive scan of blockDim.x elements per block, double-buffered in shared memory.
extern "C" __global__ void scan_naive(float *g_odata, const float *g_idata, int n)
{
    extern __shared__ float temp[];
    int thid = threadIdx.x;
    int base = blockIdx.x * blockDim.x;
    int pout = 0, pin = 1;
    temp[pout * blockDim.x + thid] = (base + thid < n) ? g_idata[base + thid] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < blockDim.x; offset *= 2) {
        pout = 1 - pout;
        pin = 1 - pout;
        if (thid >= offset)
            temp[pout * blockDim.x + thid] = temp[pin * blockDim.x + thid] + temp[pin * blockDim.x + thid - offset];
        else
            temp[pout * blockDim.x + thid] = temp[pin * blockDim.x + thid];
        __syncthreads();
    }
    if (base + thid < n) g_odata[base + thid] = temp[pout * blockDim.x + thid];
}

// Exclusive work-efficient scan of 2 * blockDim.x elements per block; block sums to g_sums.
extern "C" __global__ void scan_blelloch(float *g_odata, const float *g_idata, float *g_sums, int n)
{
    extern __shared__ float temp[];
    int thid = threadIdx.x;
    int m = 2 * blockDim.x;
    int base = blockIdx.x * m;
    temp[2 * thid] = (base + 2 * thid < n) ? g_idata[base + 2 * thid] : 0.0f;
    temp[2 * thid + 1] = (base + 2 * thid + 1 < n) ? g_idata[base + 2 * thid + 1] : 0.0f;
    int offset = 1;
    for (int d = m >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }
    if (thid == 0) {
        g_sums[blockIdx.x] = temp[m - 1];
        temp[m - 1] = 0;
    }
    for (int d = 1; d < m; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            float t = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += t;
        }
    }
    __syncthreads();
    if (base + 2 * thid < n) g_odata[base + 2 * thid] = temp[2 * thid];
    if (base + 2 * thid + 1 < n) g_odata[base + 2 * thid + 1] = temp[2 * thid + 1];
}

// Inclusive scan of a block with warp shuffles, then across the warps.
extern "C" __global__ void shfl_scan(int *data, int width, int *partial_sums, int n)
{
    extern __shared__ int sums[];
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    int lane_id = id % warpSize;
    int warp_id = threadIdx.x / warpSize;
    int value = id < n ? data[id] : 0;
#pragma unroll
    for (int i = 1; i <= width; i *= 2) {
        unsigned int mask = 0xffffffff;
        int nv = __shfl_up_sync(mask, value, i, width);
        if (lane_id >= i) value += nv;
    }
    if (threadIdx.x % warpSize == warpSize - 1) sums[warp_id] = value;
    __syncthreads();
    if (warp_id == 0 && lane_id < (blockDim.x / warpSize)) {
        int warp_sum = sums[lane_id];
        int mask = (1 << (blockDim.x / warpSize)) - 1;
        for (int i = 1; i <= (blockDim.x / warpSize); i *= 2) {
            int nv = __shfl_up_sync(mask, warp_sum, i, (blockDim.x / warpSize));
            if (lane_id >= i) warp_sum += nv;
        }
        sums[lane_id] = warp_sum;
    }
    __syncthreads();
    int blockSum = 0;
    if (warp_id > 0) blockSum = sums[warp_id - 1];
    value += blockSum;
    if (id < n) data[id] = value;
    if (partial_sums != NULL && threadIdx.x == blockDim.x - 1) partial_sums[blockIdx.x] = value;
}

// Adds the scanned sum of the preceding blocks to each element.
extern "C" __global__ void uniform_add(int *data, const int *partial_sums, int len)
{
    __shared__ int buf;
    int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id > len) return;
    if (threadIdx.x == 0) buf = blockIdx.x > 0 ? partial_sums[blockIdx.x - 1] : 0;
    __syncthreads();
    if (id < len) data[id] += buf;
}
