// Sorting networks in the style of the CUDA samples' "sortingNetworks": a bitonic sort of
// each block's keys (with their values) in shared memory, and the global merge step.
#define SHARED_SIZE_LIMIT 1024U

__device__ inline void Comparator(unsigned int &keyA, unsigned int &valA, unsigned int &keyB, unsigned int &valB,
                                  unsigned int dir)
{
    unsigned int t;
    if ((keyA > keyB) == dir) {
        t = keyA; keyA = keyB; keyB = t;
        t = valA; valA = valB; valB = t;
    }
}

// Sorts arrayLength (a power of two, <= SHARED_SIZE_LIMIT) keys per block; 2 per thread.
extern "C" __global__ void bitonicSortShared(unsigned int *d_DstKey, unsigned int *d_DstVal, const unsigned int *d_SrcKey,
                                             const unsigned int *d_SrcVal, unsigned int arrayLength, unsigned int dir)
{
    __shared__ unsigned int s_key[SHARED_SIZE_LIMIT];
    __shared__ unsigned int s_val[SHARED_SIZE_LIMIT];
    d_SrcKey += blockIdx.x * arrayLength + threadIdx.x;
    d_SrcVal += blockIdx.x * arrayLength + threadIdx.x;
    d_DstKey += blockIdx.x * arrayLength + threadIdx.x;
    d_DstVal += blockIdx.x * arrayLength + threadIdx.x;
    s_key[threadIdx.x + 0] = d_SrcKey[0];
    s_val[threadIdx.x + 0] = d_SrcVal[0];
    s_key[threadIdx.x + (arrayLength / 2)] = d_SrcKey[(arrayLength / 2)];
    s_val[threadIdx.x + (arrayLength / 2)] = d_SrcVal[(arrayLength / 2)];
    for (unsigned int size = 2; size < arrayLength; size <<= 1) {
        unsigned int ddd = dir ^ ((threadIdx.x & (size / 2)) != 0);
        for (unsigned int stride = size / 2; stride > 0; stride >>= 1) {
            __syncthreads();
            unsigned int pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
            Comparator(s_key[pos + 0], s_val[pos + 0], s_key[pos + stride], s_val[pos + stride], ddd);
        }
    }
    for (unsigned int stride = arrayLength / 2; stride > 0; stride >>= 1) {
        __syncthreads();
        unsigned int pos = 2 * threadIdx.x - (threadIdx.x & (stride - 1));
        Comparator(s_key[pos + 0], s_val[pos + 0], s_key[pos + stride], s_val[pos + stride], dir);
    }
    __syncthreads();
    d_DstKey[0] = s_key[threadIdx.x + 0];
    d_DstVal[0] = s_val[threadIdx.x + 0];
    d_DstKey[(arrayLength / 2)] = s_key[threadIdx.x + (arrayLength / 2)];
    d_DstVal[(arrayLength / 2)] = s_val[threadIdx.x + (arrayLength / 2)];
}

// One compare-exchange step (size, stride) of a bitonic sort over the whole array (in place).
extern "C" __global__ void bitonicMergeGlobal(unsigned int *d_Key, unsigned int *d_Val, unsigned int arrayLength,
                                              unsigned int size, unsigned int stride, unsigned int dir)
{
    unsigned int global_comparatorI = blockIdx.x * blockDim.x + threadIdx.x;
    if (global_comparatorI >= arrayLength / 2) return;
    unsigned int comparatorI = global_comparatorI & (arrayLength / 2 - 1);
    unsigned int ddd = dir ^ ((comparatorI & (size / 2)) != 0);
    unsigned int pos = 2 * global_comparatorI - (global_comparatorI & (stride - 1));
    unsigned int keyA = d_Key[pos + 0], valA = d_Val[pos + 0];
    unsigned int keyB = d_Key[pos + stride], valB = d_Val[pos + stride];
    Comparator(keyA, valA, keyB, valB, ddd);
    d_Key[pos + 0] = keyA; d_Val[pos + 0] = valA;
    d_Key[pos + stride] = keyB; d_Val[pos + stride] = valB;
}

// Odd-even transposition step for small arrays.
extern "C" __global__ void oddEvenStep(int *keys, int n, int phase)
{
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x) + (phase & 1);
    if (i + 1 < n && keys[i] > keys[i + 1]) {
        int t = keys[i];
        keys[i] = keys[i + 1];
        keys[i + 1] = t;
    }
}
