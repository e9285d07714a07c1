// Stencils in the style of the CUDA samples' "convolutionSeparable" (the filter in __constant__
// memory, set from Python) and of common 1-D / 2-D stencil benchmarks.
#define KERNEL_RADIUS 4
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)
#define RADIUS 3
#define BLOCK 128

__constant__ float c_Kernel[KERNEL_LENGTH];

// Row convolution with clamp-to-zero borders, one output per thread.
extern "C" __global__ void convolutionRows(float *d_Dst, const float *d_Src, int imageW, int imageH)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= imageW || y >= imageH) return;
    float sum = 0;
#pragma unroll
    for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++) {
        int xx = x + j;
        if (xx >= 0 && xx < imageW) sum += c_Kernel[KERNEL_RADIUS - j] * d_Src[y * imageW + xx];
    }
    d_Dst[y * imageW + x] = sum;
}

// Column convolution through a shared tile with halo rows.
extern "C" __global__ void convolutionColumns(float *d_Dst, const float *d_Src, int imageW, int imageH)
{
    __shared__ float s_Data[16 + 2 * KERNEL_RADIUS][16];
    int x = blockIdx.x * 16 + threadIdx.x;
    int y0 = blockIdx.y * 16;
    for (int r = threadIdx.y; r < 16 + 2 * KERNEL_RADIUS; r += blockDim.y) {
        int yy = y0 + r - KERNEL_RADIUS;
        s_Data[r][threadIdx.x] = (x < imageW && yy >= 0 && yy < imageH) ? d_Src[yy * imageW + x] : 0.0f;
    }
    __syncthreads();
    int y = y0 + threadIdx.y;
    if (x >= imageW || y >= imageH) return;
    float sum = 0;
    for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++) sum += c_Kernel[KERNEL_RADIUS - j] * s_Data[threadIdx.y + KERNEL_RADIUS + j][threadIdx.x];
    d_Dst[y * imageW + x] = sum;
}

// 1-D stencil of radius RADIUS with a shared halo (the classic teaching example).
extern "C" __global__ void stencil_1d(const int *in, int *out, int n)
{
    __shared__ int temp[BLOCK + 2 * RADIUS];
    int gindex = threadIdx.x + blockIdx.x * blockDim.x;
    int lindex = threadIdx.x + RADIUS;
    temp[lindex] = gindex < n ? in[gindex] : 0;
    if (threadIdx.x < RADIUS) {
        temp[lindex - RADIUS] = (gindex >= RADIUS && gindex - RADIUS < n) ? in[gindex - RADIUS] : 0;
        temp[lindex + BLOCK] = (gindex + BLOCK < n) ? in[gindex + BLOCK] : 0;
    }
    __syncthreads();
    if (gindex >= n) return;
    int result = 0;
    for (int offset = -RADIUS; offset <= RADIUS; offset++) result += temp[lindex + offset];
    out[gindex] = result;
}

// One Jacobi sweep of the 2-D Laplace equation (interior points; borders copied).
extern "C" __global__ void jacobi2d(double *unew, const double *u, int nx, int ny)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= nx || j >= ny) return;
    int k = j * nx + i;
    if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
        unew[k] = u[k];
    else
        unew[k] = 0.25 * (u[k - 1] + u[k + 1] + u[k - nx] + u[k + nx]);
}

// 7-point 3-D stencil (heat equation step) with a coefficient pair in a vector type.
extern "C" __global__ void heat3d(float *out, const float *in, int nx, int ny, int nz, float2 coef)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= nx || j >= ny) return;
    for (int k = 0; k < nz; k++) {
        int c = (k * ny + j) * nx + i;
        if (i == 0 || j == 0 || k == 0 || i == nx - 1 || j == ny - 1 || k == nz - 1) {
            out[c] = in[c];
            continue;
        }
        out[c] = coef.x * in[c] + coef.y * (in[c - 1] + in[c + 1] + in[c - nx] + in[c + nx] + in[c - nx * ny] + in[c + nx * ny]);
    }
}
