"""The corpus cases: one function per kernel (or kernel pair) that makes inputs, launches
through ``ctx`` and compares with NumPy. ``ctx`` runs the same code on the CPU emulation and
on a GPU: ``ctx.kernel(file, expression)``, ``ctx.launch(kernel, *args, grid=, block=,
shared_mem=)``, ``ctx.array(host)`` (a device copy) and ``ctx.host(device)``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FILES = sorted(p.name for p in HERE.glob("*.cu"))

CASES: dict = {}


def case(name, file, *kernels):
    def register(fn):
        CASES[name] = (file, kernels, fn)
        return fn

    return register


def _rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------ reductions

N_RED = 3000


def _reduce(ctx, expression, per_block, block, grid=None, smem=True):
    x = _rng(1).random(N_RED, dtype=np.float32)
    grid = grid or math.ceil(N_RED / per_block)
    out = ctx.array(np.zeros(grid, np.float32))
    k = ctx.kernel("reduction.cu", expression)
    ctx.launch(k, ctx.array(x), out, N_RED, grid=grid, block=block, shared_mem=4 * block if smem else 0)
    np.testing.assert_allclose(ctx.host(out).sum(dtype=np.float64), x.sum(dtype=np.float64), rtol=1e-5)


for _name, _expr, _per, _smem in [
    ("reduce0", "reduce0", 128, True),
    ("reduce1", "reduce1", 128, True),
    ("reduce2", "reduce2", 128, True),
    ("reduce3", "reduce3", 256, True),
    ("reduce4", "reduce4<128>", 256, False),
    ("reduce5", "reduce5<128>", 256, False),
]:

    def _run(ctx, _expr=_expr, _per=_per, _smem=_smem):
        _reduce(ctx, _expr, _per, 128, smem=_smem)

    case(_name, "reduction.cu", _expr)(_run)


@case("reduce6", "reduction.cu", "reduce6<128, true>", "reduce6<128, false>")
def _reduce6(ctx):
    _reduce(ctx, "reduce6<128, true>", 0, 128, grid=4, smem=False)
    _reduce(ctx, "reduce6<128, false>", 0, 128, grid=5, smem=False)


@case("cg_reduce", "reduction.cu", "cg_reduce<128>")
def _cg_reduce(ctx):
    _reduce(ctx, "cg_reduce<128>", 0, 128, grid=6, smem=False)


@case("cg_reduce_multi_warp", "reduction.cu", "cg_reduce_multi_warp<256>")
def _cg_reduce_multi(ctx):
    _reduce(ctx, "cg_reduce_multi_warp<256>", 0, 256, grid=3, smem=False)


# ------------------------------------------------------------------ transposes

W, H = 96, 64  # multiples of TILE_DIM (32)


def _matrix():
    return _rng(2).random((H, W), dtype=np.float32)


for _name in ("copy", "copySharedMem", "transposeNaive", "transposeCoalesced", "transposeNoBankConflicts"):

    def _run(ctx, _name=_name):
        a = _matrix()
        out = ctx.array(np.zeros(W * H, np.float32))
        ctx.launch(ctx.kernel("transpose.cu", _name), out, ctx.array(a), W, H, grid=(W // 32, H // 32), block=(32, 8))
        want = a if _name.startswith("copy") else a.T
        np.testing.assert_array_equal(ctx.host(out).reshape(want.shape), want)

    case(_name, "transpose.cu", _name)(_run)


@case("transposeDiagonal", "transpose.cu", "transposeDiagonal")
def _diagonal(ctx):
    for w, h in ((64, 64), (W, H)):
        a = _rng(3).random((h, w), dtype=np.float32)
        out = ctx.array(np.zeros(w * h, np.float32))
        ctx.launch(
            ctx.kernel("transpose.cu", "transposeDiagonal"),
            out,
            ctx.array(a),
            w,
            h,
            grid=(w // 32, h // 32),
            block=(32, 8),
        )
        np.testing.assert_array_equal(ctx.host(out).reshape(w, h), a.T)


@case("transposeFloat4", "transpose.cu", "transposeFloat4")
def _float4(ctx):
    a = _matrix()  # H x W floats = H x W/4 float4
    out = ctx.array(np.zeros((W * H // 4, 4), np.float32))
    src = ctx.array(np.ascontiguousarray(a).reshape(-1, 4))
    ctx.launch(ctx.kernel("transpose.cu", "transposeFloat4"), out, src, W // 4, H // 4, grid=(2, 2), block=(16, 16))
    np.testing.assert_array_equal(ctx.host(out).reshape(W, H), a.T)


# ------------------------------------------------------------------ histograms


def _words(n, seed=4):
    return _rng(seed).integers(0, 2**32, n, dtype=np.uint32)


def _bytes_of(words):
    return words.view(np.uint8)


@case("histogram256", "histogram.cu", "histogram256Kernel", "mergeHistogram256Kernel")
def _hist256(ctx):
    data = _words(5000)
    blocks = 7
    partial = ctx.array(np.zeros(blocks * 256, np.uint32))
    ctx.launch(
        ctx.kernel("histogram.cu", "histogram256Kernel"), partial, ctx.array(data), data.size, grid=blocks, block=192
    )
    hist = ctx.array(np.zeros(256, np.uint32))
    ctx.launch(ctx.kernel("histogram.cu", "mergeHistogram256Kernel"), hist, partial, blocks, grid=256, block=256)
    np.testing.assert_array_equal(ctx.host(hist), np.bincount(_bytes_of(data), minlength=256))


@case("histogram64", "histogram.cu", "histogram64Kernel")
def _hist64(ctx):
    data = _words(4 * 1500, seed=5)
    blocks = 5
    partial = ctx.array(np.zeros(blocks * 64, np.uint32))
    ctx.launch(
        ctx.kernel("histogram.cu", "histogram64Kernel"),
        partial,
        ctx.array(data.reshape(-1, 4)),
        data.size // 4,
        grid=blocks,
        block=128,
    )
    want = np.bincount(_bytes_of(data) >> 2, minlength=64)
    np.testing.assert_array_equal(ctx.host(partial).reshape(blocks, 64).sum(axis=0), want)


@case("histogramGlobal", "histogram.cu", "histogramGlobal")
def _hist_global(ctx):
    data = _rng(6).integers(0, 256, 7777, dtype=np.uint8)
    hist = ctx.array(np.zeros(256, np.uint32))
    ctx.launch(ctx.kernel("histogram.cu", "histogramGlobal"), hist, ctx.array(data), data.size, grid=8, block=128)
    np.testing.assert_array_equal(ctx.host(hist), np.bincount(data, minlength=256))


# ------------------------------------------------------------------ scans


@case("scan_naive", "scan.cu", "scan_naive")
def _scan_naive(ctx):
    n, b = 1000, 128
    x = _rng(7).random(n, dtype=np.float32)
    out = ctx.array(np.zeros(n, np.float32))
    ctx.launch(
        ctx.kernel("scan.cu", "scan_naive"), out, ctx.array(x), n, grid=math.ceil(n / b), block=b, shared_mem=2 * 4 * b
    )
    want = np.concatenate([np.cumsum(x[i : i + b], dtype=np.float64) for i in range(0, n, b)])
    np.testing.assert_allclose(ctx.host(out), want, rtol=1e-5)


@case("scan_blelloch", "scan.cu", "scan_blelloch")
def _scan_blelloch(ctx):
    n, b = 1000, 64
    x = _rng(8).integers(0, 10, n).astype(np.float32)
    blocks = math.ceil(n / (2 * b))
    out = ctx.array(np.zeros(n, np.float32))
    sums = ctx.array(np.zeros(blocks, np.float32))
    ctx.launch(
        ctx.kernel("scan.cu", "scan_blelloch"), out, ctx.array(x), sums, n, grid=blocks, block=b, shared_mem=2 * 4 * b
    )
    want = np.concatenate([np.cumsum(x[i : i + 2 * b]) - x[i : i + 2 * b] for i in range(0, n, 2 * b)])
    np.testing.assert_array_equal(ctx.host(out), want)
    np.testing.assert_array_equal(ctx.host(sums), [x[i : i + 2 * b].sum() for i in range(0, n, 2 * b)])


@case("shfl_scan", "scan.cu", "shfl_scan", "uniform_add")
def _shfl_scan(ctx):
    n, b = 1024, 256  # whole blocks: uniform_add returns before its barrier past the end
    x = _rng(9).integers(0, 100, n).astype(np.int32)
    blocks = math.ceil(n / b)
    data = ctx.array(x)
    partial = ctx.array(np.zeros(blocks, np.int32))
    scan = ctx.kernel("scan.cu", "shfl_scan")
    ctx.launch(scan, data, 32, partial, n, grid=blocks, block=b, shared_mem=4 * (b // 32))
    ctx.launch(scan, partial, 32, ctx.array(np.zeros(1, np.int32)), blocks, grid=1, block=32, shared_mem=4)
    ctx.launch(ctx.kernel("scan.cu", "uniform_add"), data, partial, n, grid=blocks, block=b)
    np.testing.assert_array_equal(ctx.host(data), np.cumsum(x))


# ------------------------------------------------------------------ sorts


@case("bitonicSortShared", "sort.cu", "bitonicSortShared")
def _bitonic_shared(ctx):
    length, batches = 256, 3
    keys = _rng(10).integers(0, 1000, length * batches).astype(np.uint32)
    vals = np.arange(keys.size, dtype=np.uint32)
    dk, dv = ctx.array(np.zeros_like(keys)), ctx.array(np.zeros_like(vals))
    ctx.launch(
        ctx.kernel("sort.cu", "bitonicSortShared"),
        dk,
        dv,
        ctx.array(keys),
        ctx.array(vals),
        length,
        1,
        grid=batches,
        block=length // 2,
    )
    k, v = ctx.host(dk).reshape(batches, length), ctx.host(dv).reshape(batches, length)
    np.testing.assert_array_equal(k, np.sort(keys.reshape(batches, length), axis=1))
    np.testing.assert_array_equal(keys[v], k)


@case("bitonicMergeGlobal", "sort.cu", "bitonicMergeGlobal")
def _bitonic_global(ctx):
    n = 1024
    keys = _rng(11).integers(0, 10**6, n).astype(np.uint32)
    dk, dv = ctx.array(keys), ctx.array(np.arange(n, dtype=np.uint32))
    k = ctx.kernel("sort.cu", "bitonicMergeGlobal")
    size = 2
    while size <= n:
        stride = size // 2
        while stride > 0:
            ctx.launch(k, dk, dv, n, size, stride, 1, grid=4, block=128)
            stride //= 2
        size *= 2
    np.testing.assert_array_equal(ctx.host(dk), np.sort(keys))
    np.testing.assert_array_equal(keys[ctx.host(dv)], np.sort(keys))


@case("oddEvenStep", "sort.cu", "oddEvenStep")
def _odd_even(ctx):
    n = 100
    keys = _rng(12).integers(-50, 50, n).astype(np.int32)
    d = ctx.array(keys)
    k = ctx.kernel("sort.cu", "oddEvenStep")
    for phase in range(n):
        ctx.launch(k, d, n, phase, grid=1, block=64)
    np.testing.assert_array_equal(ctx.host(d), np.sort(keys))


# ------------------------------------------------------------------ stencils

FILTER = np.array([1, 2, 3, 4, 5, 4, 3, 2, 1], np.float32) / 25


def _convolve_axis(img, axis):
    out = np.zeros_like(img, dtype=np.float64)
    r = 4
    n = img.shape[axis]
    for j in range(-r, r + 1):
        shifted = np.zeros_like(img, dtype=np.float64)
        src = [slice(None)] * 2
        dst = [slice(None)] * 2
        if j >= 0:
            src[axis], dst[axis] = slice(j, n), slice(0, n - j)
        else:
            src[axis], dst[axis] = slice(0, n + j), slice(-j, n)
        shifted[tuple(dst)] = img[tuple(src)]
        out += FILTER[r - j] * shifted
    return out


@case("convolutionRows", "stencil.cu", "convolutionRows")
def _conv_rows(ctx):
    img = _rng(13).random((40, 50), dtype=np.float32)
    k = ctx.kernel("stencil.cu", "convolutionRows")
    ctx.set_global(k, "c_Kernel", FILTER)
    out = ctx.array(np.zeros_like(img))
    ctx.launch(k, out, ctx.array(img), 50, 40, grid=(4, 3), block=(16, 16))
    np.testing.assert_allclose(ctx.host(out), _convolve_axis(img, 1), rtol=1e-5, atol=1e-6)


@case("convolutionColumns", "stencil.cu", "convolutionColumns")
def _conv_cols(ctx):
    img = _rng(14).random((40, 50), dtype=np.float32)
    k = ctx.kernel("stencil.cu", "convolutionColumns")
    ctx.set_global(k, "c_Kernel", FILTER)
    out = ctx.array(np.zeros_like(img))
    ctx.launch(k, out, ctx.array(img), 50, 40, grid=(4, 3), block=(16, 16))
    np.testing.assert_allclose(ctx.host(out), _convolve_axis(img, 0), rtol=1e-5, atol=1e-6)


@case("stencil_1d", "stencil.cu", "stencil_1d")
def _stencil_1d(ctx):
    n = 1000
    x = _rng(15).integers(0, 100, n).astype(np.int32)
    out = ctx.array(np.zeros(n, np.int32))
    ctx.launch(ctx.kernel("stencil.cu", "stencil_1d"), ctx.array(x), out, n, grid=math.ceil(n / 128), block=128)
    padded = np.pad(x, 3)
    np.testing.assert_array_equal(ctx.host(out), sum(padded[3 + o : 3 + o + n] for o in range(-3, 4)))


@case("jacobi2d", "stencil.cu", "jacobi2d")
def _jacobi(ctx):
    ny, nx = 30, 45
    u = _rng(16).random((ny, nx))
    out = ctx.array(np.zeros_like(u))
    ctx.launch(ctx.kernel("stencil.cu", "jacobi2d"), out, ctx.array(u), nx, ny, grid=(3, 2), block=(16, 16))
    want = u.copy()
    want[1:-1, 1:-1] = 0.25 * (u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1])
    np.testing.assert_allclose(ctx.host(out).reshape(ny, nx), want, rtol=1e-12)


@case("heat3d", "stencil.cu", "heat3d")
def _heat3d(ctx):
    nz, ny, nx = 6, 10, 12
    u = _rng(17).random((nz, ny, nx), dtype=np.float32)
    out = ctx.array(np.zeros_like(u))
    ctx.launch(
        ctx.kernel("stencil.cu", "heat3d"), out, ctx.array(u), nx, ny, nz, (0.4, 0.1), grid=(1, 1), block=(16, 16)
    )
    want = u.astype(np.float64)
    inner = 0.4 * u[1:-1, 1:-1, 1:-1] + 0.1 * (
        u[1:-1, 1:-1, :-2]
        + u[1:-1, 1:-1, 2:]
        + u[1:-1, :-2, 1:-1]
        + u[1:-1, 2:, 1:-1]
        + u[:-2, 1:-1, 1:-1]
        + u[2:, 1:-1, 1:-1]
    )
    want[1:-1, 1:-1, 1:-1] = inner
    np.testing.assert_allclose(ctx.host(out), want, rtol=1e-5)


# ------------------------------------------------------------------ graphs and elimination


def _graph(n=200, seed=18):
    rng = _rng(seed)
    degree = rng.integers(0, 5, n)
    starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
    edges = rng.integers(0, n, degree.sum()).astype(np.int32)
    node_t = np.dtype([("starting", "<i4"), ("no_of_edges", "<i4")])
    nodes = np.zeros(n, node_t)
    nodes["starting"], nodes["no_of_edges"] = starts, degree
    return nodes, edges


@case("bfs", "graph.cu", "bfs_level", "bfs_update")
def _bfs(ctx):
    nodes, edges = _graph()
    n = nodes.size
    mask = np.zeros(n, np.int8)
    visited = np.zeros(n, np.int8)
    mask[0] = visited[0] = 1
    cost = np.full(n, 2**30, np.int32)
    cost[0] = 0
    d_nodes, d_edges = ctx.array(nodes), ctx.array(edges)
    d_mask, d_visited, d_cost = ctx.array(mask), ctx.array(visited), ctx.array(cost)
    d_update = ctx.array(np.zeros(n, np.int32))
    level = ctx.kernel("graph.cu", "bfs_level")
    update = ctx.kernel("graph.cu", "bfs_update")
    for _ in range(n):
        over = ctx.array(np.zeros(1, np.int32))
        ctx.launch(level, d_nodes, d_edges, d_mask, d_update, d_visited, d_cost, n, grid=2, block=128)
        ctx.launch(update, d_mask, d_update, d_visited, over, n, grid=2, block=128)
        if not ctx.host(over)[0]:
            break
    # NumPy BFS
    want = np.full(n, 2**30, np.int64)
    want[0] = 0
    frontier = [0]
    while frontier:
        nxt = []
        for u in frontier:
            for v in edges[nodes["starting"][u] : nodes["starting"][u] + nodes["no_of_edges"][u]]:
                if want[v] == 2**30:
                    want[v] = want[u] + 1
                    nxt.append(int(v))
        frontier = nxt
    np.testing.assert_array_equal(ctx.host(d_cost), want)


@case("sssp_relax", "graph.cu", "sssp_relax")
def _sssp(ctx):
    nodes, targets = _graph(150, seed=19)
    n = nodes.size
    edge_t = np.dtype([("to", "<i4"), ("weight", "<f4")])
    edges = np.zeros(targets.size, edge_t)
    edges["to"], edges["weight"] = targets, _rng(20).integers(1, 10, targets.size)
    dist = np.full(n, np.inf, np.float32)
    dist[0] = 0
    k = ctx.kernel("graph.cu", "sssp_relax")
    d_nodes, d_edges = ctx.array(nodes), ctx.array(edges)
    for _ in range(n):
        changed = ctx.array(np.zeros(1, np.int32))
        nxt = ctx.array(dist.copy())
        ctx.launch(k, d_nodes, d_edges, ctx.array(dist), nxt, changed, n, grid=2, block=128)
        dist = ctx.host(nxt).copy()
        if not ctx.host(changed)[0]:
            break
    want = np.full(n, np.inf)
    want[0] = 0
    for _ in range(n):  # Bellman-Ford in NumPy
        for u in range(n):
            s, c = nodes["starting"][u], nodes["no_of_edges"][u]
            for e in range(s, s + c):
                want[edges["to"][e]] = min(want[edges["to"][e]], want[u] + edges["weight"][e])
    np.testing.assert_array_equal(dist, want.astype(np.float32))


@case("gaussian", "graph.cu", "Fan1", "Fan2")
def _gaussian(ctx):
    size = 24
    rng = _rng(21)
    a = (rng.random((size, size)) + size * np.eye(size)).astype(np.float32)
    b = rng.random(size).astype(np.float32)
    da, db = ctx.array(a), ctx.array(b)
    m = ctx.array(np.zeros_like(a))
    fan1 = ctx.kernel("graph.cu", "Fan1")
    fan2 = ctx.kernel("graph.cu", "Fan2")
    for t in range(size - 1):
        ctx.launch(fan1, m, da, size, t, grid=1, block=32)
        ctx.launch(fan2, m, da, db, size, size - t, t, grid=(2, 2), block=(16, 16))
    upper, rhs = ctx.host(da).reshape(size, size).astype(np.float64), ctx.host(db).astype(np.float64)
    x = np.zeros(size)
    for i in range(size - 1, -1, -1):
        x[i] = (rhs[i] - upper[i, i + 1 :] @ x[i + 1 :]) / upper[i, i]
    np.testing.assert_allclose(x, np.linalg.solve(a.astype(np.float64), b), rtol=1e-4)


# ------------------------------------------------------------------ options


def _cnd(d):
    from math import erf

    return 0.5 * (1 + np.vectorize(erf)(d / np.sqrt(2)))


@case("BlackScholes", "options.cu", "BlackScholesGPU")
def _black_scholes(ctx):
    n = 1000
    rng = _rng(22)
    s = rng.uniform(5, 30, n).astype(np.float32)
    x = rng.uniform(1, 100, n).astype(np.float32)
    t = rng.uniform(0.25, 10, n).astype(np.float32)
    r, v = 0.02, 0.30
    call, put = ctx.array(np.zeros((n // 2, 2), np.float32)), ctx.array(np.zeros((n // 2, 2), np.float32))
    ctx.launch(
        ctx.kernel("options.cu", "BlackScholesGPU"),
        call,
        put,
        ctx.array(s.reshape(-1, 2)),
        ctx.array(x.reshape(-1, 2)),
        ctx.array(t.reshape(-1, 2)),
        r,
        v,
        n,
        grid=4,
        block=128,
    )
    s64, x64, t64 = s.astype(np.float64), x.astype(np.float64), t.astype(np.float64)
    d1 = (np.log(s64 / x64) + (r + 0.5 * v * v) * t64) / (v * np.sqrt(t64))
    d2 = d1 - v * np.sqrt(t64)
    want_call = s64 * _cnd(d1) - x64 * np.exp(-r * t64) * _cnd(d2)
    want_put = x64 * np.exp(-r * t64) * (1 - _cnd(d2)) - s64 * (1 - _cnd(d1))
    np.testing.assert_allclose(ctx.host(call).ravel(), want_call, atol=2e-3 * 30)
    np.testing.assert_allclose(ctx.host(put).ravel(), want_put, atol=2e-3 * 100)


@case("binomialOptions", "options.cu", "binomialOptionsKernel")
def _binomial(ctx):
    n, steps = 6, 64
    rng = _rng(23)
    s, x = rng.uniform(5, 30, n), rng.uniform(1, 50, n)
    t, r, v = rng.uniform(0.25, 5, n), 0.06, 0.10
    dt = t / steps
    vdt = v * np.sqrt(dt)
    rdt = r * dt
    df = np.exp(-rdt)
    u, d = np.exp(vdt), np.exp(-vdt)
    pu = (np.exp(rdt) - d) / (u - d)
    out = ctx.array(np.zeros(n))
    ctx.launch(
        ctx.kernel("options.cu", "binomialOptionsKernel"),
        ctx.array(s),
        ctx.array(x),
        ctx.array(vdt),
        ctx.array(pu * df),
        ctx.array((1 - pu) * df),
        out,
        grid=n,
        block=64,
    )
    want = []
    for i in range(n):
        prices = s[i] * u[i] ** (2.0 * np.arange(steps + 1) - steps)
        c = np.maximum(prices - x[i], 0.0)
        for step in range(steps, 0, -1):
            c = pu[i] * df[i] * c[1 : step + 1] + (1 - pu[i]) * df[i] * c[:step]
        want.append(c[0])
    np.testing.assert_allclose(ctx.host(out), want, rtol=1e-10)


# ------------------------------------------------------------------ basics


@case("vectorAdd", "basics.cu", "vectorAdd")
def _vector_add(ctx):
    n = 5000
    a, b = _rng(24).random(n, dtype=np.float32), _rng(25).random(n, dtype=np.float32)
    c = ctx.array(np.zeros(n, np.float32))
    ctx.launch(
        ctx.kernel("basics.cu", "vectorAdd"), ctx.array(a), ctx.array(b), c, n, grid=math.ceil(n / 256), block=256
    )
    np.testing.assert_array_equal(ctx.host(c), a + b)


@case("matrixMul", "basics.cu", "MatrixMulCUDA<16>")
def _matrix_mul(ctx):
    ha, wa, wb = 48, 32, 64
    a = _rng(26).random((ha, wa), dtype=np.float32)
    b = _rng(27).random((wa, wb), dtype=np.float32)
    c = ctx.array(np.zeros((ha, wb), np.float32))
    ctx.launch(
        ctx.kernel("basics.cu", "MatrixMulCUDA<16>"),
        c,
        ctx.array(a),
        ctx.array(b),
        wa,
        wb,
        grid=(wb // 16, ha // 16),
        block=(16, 16),
    )
    np.testing.assert_allclose(ctx.host(c), a.astype(np.float64) @ b, rtol=1e-5)


@case("saxpy", "basics.cu", "saxpy")
def _saxpy(ctx):
    n = 3000
    x, y = _rng(28).random(n), _rng(29).random(n)
    dy = ctx.array(y)
    ctx.launch(ctx.kernel("basics.cu", "saxpy"), n, 2.5, ctx.array(x), dy, grid=4, block=128)
    np.testing.assert_allclose(ctx.host(dy), 2.5 * x + y, rtol=1e-15)


@case("dot", "basics.cu", "dot")
def _dot(ctx):
    n = 4000
    a, b = _rng(30).random(n), _rng(31).random(n)
    res = ctx.array(np.zeros(1))
    ctx.launch(ctx.kernel("basics.cu", "dot"), ctx.array(a), ctx.array(b), res, n, grid=4, block=256)
    np.testing.assert_allclose(ctx.host(res)[0], a @ b, rtol=1e-12)
