// Histograms in the style of the CUDA samples' "histogram": 256 bins with per-block partial
// histograms in shared memory and a merge kernel; 64 bins over data read as uint4 (16 bytes).
typedef unsigned int uint;
typedef unsigned char uchar;
typedef uint4 data_t;

#define HISTOGRAM256_BIN_COUNT 256
#define HISTOGRAM64_BIN_COUNT 64
#define MERGE_THREADBLOCK_SIZE 256

extern "C" __global__ void histogram256Kernel(uint *d_PartialHistograms, const uint *d_Data, uint dataCount)
{
    __shared__ uint s_Hist[HISTOGRAM256_BIN_COUNT];
    for (uint i = threadIdx.x; i < HISTOGRAM256_BIN_COUNT; i += blockDim.x) s_Hist[i] = 0;
    __syncthreads();
    for (uint pos = blockIdx.x * blockDim.x + threadIdx.x; pos < dataCount; pos += blockDim.x * gridDim.x) {
        uint data = d_Data[pos];
        atomicAdd(s_Hist + ((data >> 0) & 0xFFU), 1);
        atomicAdd(s_Hist + ((data >> 8) & 0xFFU), 1);
        atomicAdd(s_Hist + ((data >> 16) & 0xFFU), 1);
        atomicAdd(s_Hist + ((data >> 24) & 0xFFU), 1);
    }
    __syncthreads();
    for (uint bin = threadIdx.x; bin < HISTOGRAM256_BIN_COUNT; bin += blockDim.x)
        d_PartialHistograms[blockIdx.x * HISTOGRAM256_BIN_COUNT + bin] = s_Hist[bin];
}

// One block per bin: sums the bin over the partial histograms.
extern "C" __global__ void mergeHistogram256Kernel(uint *d_Histogram, const uint *d_PartialHistograms, uint histogramCount)
{
    uint sum = 0;
    for (uint i = threadIdx.x; i < histogramCount; i += MERGE_THREADBLOCK_SIZE)
        sum += d_PartialHistograms[blockIdx.x + i * HISTOGRAM256_BIN_COUNT];
    __shared__ uint data[MERGE_THREADBLOCK_SIZE];
    data[threadIdx.x] = sum;
    for (uint stride = MERGE_THREADBLOCK_SIZE / 2; stride > 0; stride >>= 1) {
        __syncthreads();
        if (threadIdx.x < stride) data[threadIdx.x] += data[threadIdx.x + stride];
    }
    if (threadIdx.x == 0) d_Histogram[blockIdx.x] = data[0];
}

__device__ inline void addByte(uint *s_Hist, uint data) { atomicAdd(s_Hist + ((data >> 2) & 0x3FU), 1); }

__device__ inline void addWord(uint *s_Hist, uint data)
{
    addByte(s_Hist, (data >> 0) & 0xFFU);
    addByte(s_Hist, (data >> 8) & 0xFFU);
    addByte(s_Hist, (data >> 16) & 0xFFU);
    addByte(s_Hist, (data >> 24) & 0xFFU);
}

// 64 bins of the top 6 bits of each byte; the data is read 16 bytes at a time.
extern "C" __global__ void histogram64Kernel(uint *d_PartialHistograms, const data_t *d_Data, uint dataCount)
{
    __shared__ uint s_Hist[HISTOGRAM64_BIN_COUNT];
    for (uint i = threadIdx.x; i < HISTOGRAM64_BIN_COUNT; i += blockDim.x) s_Hist[i] = 0;
    __syncthreads();
    for (uint pos = blockIdx.x * blockDim.x + threadIdx.x; pos < dataCount; pos += blockDim.x * gridDim.x) {
        data_t d = d_Data[pos];
        addWord(s_Hist, d.x);
        addWord(s_Hist, d.y);
        addWord(s_Hist, d.z);
        addWord(s_Hist, d.w);
    }
    __syncthreads();
    for (uint bin = threadIdx.x; bin < HISTOGRAM64_BIN_COUNT; bin += blockDim.x)
        d_PartialHistograms[blockIdx.x * HISTOGRAM64_BIN_COUNT + bin] = s_Hist[bin];
}

// Global atomics only: the simplest histogram of bytes.
extern "C" __global__ void histogramGlobal(uint *d_Histogram, const uchar *d_Data, uint byteCount)
{
    for (uint pos = blockIdx.x * blockDim.x + threadIdx.x; pos < byteCount; pos += blockDim.x * gridDim.x)
        atomicAdd(&d_Histogram[d_Data[pos]], 1u);
}
