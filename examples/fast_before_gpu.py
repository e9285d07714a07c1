"""Make a kernel fast before you have a GPU: the performance analysis of emulated launches.

Two classic first-port mistakes, each found and fixed with ``kernel_testing.analyze_kernel``:
a matrix transpose (naive -> shared tile -> padded tile) and a particle push (array of
structs -> structure of arrays). Every launch runs in the CPU emulation; the figures are what
an H100's memory system would see (sectors, wavefronts, bank conflicts), counted exactly by
the rules of the performance-analysis guide.

    python examples/fast_before_gpu.py [--html DIR]
"""

import argparse
from pathlib import Path

import numpy as np

import cunumpy as xp
from cunumpy import kernel_testing as kt
from cunumpy.kernels import CudaKernel

TRANSPOSE = r"""
#define TILE 32

// each thread copies one element; a warp reads a row and writes a column
extern "C" __global__ void transpose_naive(float* out, const float* in, int n) {
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    out[x * n + y] = in[y * n + x];
}

// read a tile along rows, write it along rows: the column walk happens in shared memory
extern "C" __global__ void transpose_tiled(float* out, const float* in, int n) {
    __shared__ float tile[TILE][TILE];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}

// the same, with one column of padding: a column of the tile spans the 32 banks
extern "C" __global__ void transpose_padded(float* out, const float* in, int n) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}
"""

PUSH = r"""
// array of structs: particle i is p[6 * i .. 6 * i + 5] = x, y, z, vx, vy, vz
extern "C" __global__ void push_aos(float* p, float dt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    p[6 * i + 0] += dt * p[6 * i + 3];
    p[6 * i + 1] += dt * p[6 * i + 4];
    p[6 * i + 2] += dt * p[6 * i + 5];
}

// structure of arrays: one array per component
extern "C" __global__ void push_soa(float* x, float* y, float* z, const float* vx, const float* vy,
                                    const float* vz, float dt, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] += dt * vx[i];
    y[i] += dt * vy[i];
    z[i] += dt * vz[i];
}
"""


def efficiency(a: kt.KernelAnalysis) -> str:
    """Sectors moved against the ideal, for loads and stores."""
    t = a.totals
    moved = t["global_load_sectors"] + t["global_store_sectors"]
    ideal = t["global_load_ideal_sectors"] + t["global_store_ideal_sectors"]
    return f"{moved} sectors for {ideal} ideal ({moved / ideal:.2f}x)"


def transpose(html: Path | None) -> None:
    n = 256
    a = np.arange(n * n, dtype=np.float32)
    results = {}
    for name in ("transpose_naive", "transpose_tiled", "transpose_padded"):
        out = np.zeros_like(a)
        analysis = kt.analyze_kernel(CudaKernel(TRANSPOSE, name), out, a, np.int32(n), grid=(8, 8), block=(32, 32))
        assert np.array_equal(out.reshape(n, n), a.reshape(n, n).T)
        results[name] = analysis
        print(analysis.to_text(limit=3))
        print()
        if html is not None:
            analysis.to_html(html / f"{name}.html")
    for name, analysis in results.items():
        t = analysis.totals
        print(
            f"{name}: global {efficiency(analysis)}, shared wavefronts "
            f"{t['shared_load_wavefronts'] + t['shared_store_wavefronts']}, "
            f"{t['shared_bank_conflicts']} bank conflicts"
        )


def push(html: Path | None) -> None:
    n = 4096
    rng = np.random.default_rng(1)
    particles = rng.random((n, 6), dtype=np.float32)
    aos = particles.reshape(-1).copy()
    dt = np.float32(0.01)
    a = kt.analyze_kernel(CudaKernel(PUSH, "push_aos"), aos, dt, np.int32(n), grid=n // 256, block=256)
    x, y, z, vx, vy, vz = (particles[:, k].copy() for k in range(6))
    s = kt.analyze_kernel(CudaKernel(PUSH, "push_soa"), x, y, z, vx, vy, vz, dt, np.int32(n), grid=n // 256, block=256)
    assert np.allclose(aos.reshape(n, 6)[:, 0], x) and np.allclose(aos.reshape(n, 6)[:, 2], z)
    print(a.to_text(limit=3))
    print()
    print(s.to_text(limit=3))
    print()
    if html is not None:
        a.to_html(html / "push_aos.html")
        s.to_html(html / "push_soa.html")
    print(f"push_aos: {efficiency(a)}")
    print(f"push_soa: {efficiency(s)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--html", type=Path, help="write each analysis as an HTML page into this folder")
    args = parser.parse_args()
    if args.html is not None:
        args.html.mkdir(parents=True, exist_ok=True)
    print("backend:", xp.get_backend())
    transpose(args.html)
    print()
    push(args.html)


if __name__ == "__main__":
    main()
