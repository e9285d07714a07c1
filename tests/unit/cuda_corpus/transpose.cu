// Matrix copy and transpose variants in the style of the CUDA samples' "transpose": tiles of
// TILE_DIM x TILE_DIM, each thread block of TILE_DIM x BLOCK_ROWS threads moves one tile.
#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void copy(float *odata, const float *idata, int width, int height)
{
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index = xIndex + width * yIndex;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index + i * width] = idata[index + i * width];
}

extern "C" __global__ void copySharedMem(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index = xIndex + width * yIndex;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) tile[threadIdx.y + i][threadIdx.x] = idata[index + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index + i * width] = tile[threadIdx.y + i][threadIdx.x];
}

extern "C" __global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index_out + i] = idata[index_in + i * width];
}

extern "C" __global__ void transposeCoalesced(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM];
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + yIndex * width;
    xIndex = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx.x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + yIndex * height;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
}

extern "C" __global__ void transposeNoBankConflicts(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + yIndex * width;
    xIndex = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx.x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + yIndex * height;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
}

// Diagonal block reordering (square matrices).
extern "C" __global__ void transposeDiagonal(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    int blockIdx_x, blockIdx_y;
    if (width == height) {
        blockIdx_y = blockIdx.x;
        blockIdx_x = (blockIdx.x + blockIdx.y) % gridDim.x;
    } else {
        int bid = blockIdx.x + gridDim.x * blockIdx.y;
        blockIdx_y = bid % gridDim.y;
        blockIdx_x = ((bid / gridDim.y) + blockIdx_y) % gridDim.x;
    }
    int xIndex = blockIdx_x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx_y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + yIndex * width;
    xIndex = blockIdx_y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx_x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + yIndex * height;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS) odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
}

// A 4x4 block of floats per thread through float4 loads (vector pointers).
extern "C" __global__ void transposeFloat4(float4 *odata, const float4 *idata, int width4, int height4)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= width4 || y >= height4) return;
    float4 r0 = idata[(4 * y + 0) * width4 + x], r1 = idata[(4 * y + 1) * width4 + x];
    float4 r2 = idata[(4 * y + 2) * width4 + x], r3 = idata[(4 * y + 3) * width4 + x];
    odata[(4 * x + 0) * height4 + y] = make_float4(r0.x, r1.x, r2.x, r3.x);
    odata[(4 * x + 1) * height4 + y] = make_float4(r0.y, r1.y, r2.y, r3.y);
    odata[(4 * x + 2) * height4 + y] = make_float4(r0.z, r1.z, r2.z, r3.z);
    odata[(4 * x + 3) * height4 + y] = make_float4(r0.w, r1.w, r2.w, r3.w);
}
