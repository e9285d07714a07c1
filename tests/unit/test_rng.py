"""cunumpy.rng: Philox known answers, broadcasting and backends; random streams."""

import numpy as np
import pytest

import cunumpy as xp
from cunumpy import _reference

R = xp.rng

# Random123 known-answer vectors for Philox4x32-10: counter words, key words, result.
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def dev(a):
    return xp.to_cunumpy(np.array(a))


def host(a):
    return xp.to_numpy(a)


@pytest.mark.parametrize("ctr, key, expect", KAT)
def test_philox4x32_10_known_answers(on_backend, ctr, key, expect):
    out = R.philox4x32_10(dev(np.array(ctr, np.uint32)), key[0], key[1])
    assert out.dtype == np.uint32 and out.shape == (4,)
    assert host(out).tolist() == list(expect)
    twin = np.empty(4, np.uint32)
    _reference.philox4x32_10_into(
        np.array(ctr, np.uint32), np.array([key[0]], np.uint32), np.array([key[1]], np.uint32), twin
    )
    assert twin.tolist() == list(expect)


def test_philox4x32_10_broadcasts_keys(on_backend):
    ctrs = np.array([c for c, _, _ in KAT], np.uint32)
    k0 = np.array([k[0] for _, k, _ in KAT], np.uint32)
    k1 = np.array([k[1] for _, k, _ in KAT], np.uint32)
    out = host(R.philox4x32_10(dev(ctrs), dev(k0), dev(k1)))
    assert out.tolist() == [list(e) for _, _, e in KAT]
    grid = host(R.philox4x32_10(dev(np.zeros((2, 1, 4), np.uint32)), dev(np.zeros(3, np.uint32)), 0))
    assert grid.shape == (2, 3, 4)
    assert (grid == np.array(KAT[0][2], np.uint32)).all()
    with pytest.raises(ValueError):
        R.philox4x32_10(dev(np.zeros((2, 3), np.uint32)), 0, 0)
    with pytest.raises(TypeError):
        R.philox4x32_10(dev(np.zeros((2, 4))), 0, 0)


def _blocks(seed, stream, counter):
    """Philox block words through the public block function (the definition of the layout)."""
    ctr = np.stack(
        [
            np.uint64(counter) & np.uint64(0xFFFFFFFF),
            np.uint64(counter) >> np.uint64(32),
            np.uint64(stream) & np.uint64(0xFFFFFFFF),
            np.uint64(stream) >> np.uint64(32),
        ],
        axis=-1,
    ).astype(np.uint32)
    return R.philox4x32_10(ctr, seed & 0xFFFFFFFF, seed >> 32).astype(np.uint64)


def test_uniform_word_layout():
    seed, stream, counter = 0x0123456789ABCDEF, 0xFEDCBA9876543210, 0x1111222233334444
    w = _blocks(seed, stream, counter)
    u0 = float((w[0] | (w[1] << np.uint64(32))) >> np.uint64(11)) * 2.0**-53
    u1 = float((w[2] | (w[3] << np.uint64(32))) >> np.uint64(11)) * 2.0**-53
    assert R.philox_uniform(seed, stream, counter) == u0
    assert R.philox_uniform2(seed, stream, counter) == (u0, u1)
    z0, z1 = R.philox_normal2(seed, stream, counter)
    r = np.sqrt(-2.0 * np.log(1.0 - u0))
    assert z0 == pytest.approx(r * np.cos(2 * np.pi * u1), rel=1e-14, abs=1e-14)
    assert z1 == pytest.approx(r * np.sin(2 * np.pi * u1), rel=1e-14, abs=1e-14)
    assert R.philox_normal(seed, stream, counter) == z0


def test_philox_pure_functions_broadcast(on_backend):
    stream = dev(np.arange(5, dtype=np.uint64))[:, None]
    counter = dev(np.arange(3, dtype=np.int64))[None, :]
    u = R.philox_uniform(7, stream, counter)
    assert u.shape == (5, 3) and xp.get_array_backend(u) == on_backend
    hu = host(u)
    assert ((hu >= 0) & (hu < 1)).all()
    for i in range(5):
        for j in range(3):
            assert hu[i, j] == R.philox_uniform(7, i, j)  # a pure function of its arguments
    u0, u1 = R.philox_uniform2(7, stream, counter)
    np.testing.assert_array_equal(host(u0), hu)
    assert not np.array_equal(host(u1), hu)
    z = R.philox_normal(7, stream, counter)
    z0, z1 = R.philox_normal2(7, stream, counter)
    np.testing.assert_array_equal(host(z), host(z0))
    assert host(z1).shape == (5, 3)
    again = R.philox_uniform(7, stream, counter)
    np.testing.assert_array_equal(host(again), hu)  # no state


def test_philox_scalar_inputs_give_numpy():
    u = R.philox_uniform(1, 2, 3)
    assert isinstance(u, (float, np.floating))
    assert R.philox_uniform(2**64 - 1, 0, 0) == R.philox_uniform(-1, 0, 0)  # modulo 2**64
    with pytest.raises(TypeError):
        R.philox_uniform(1.5, 0, 0)
    with pytest.raises(OverflowError):
        R.philox_uniform(2**64, 0, 0)
    with pytest.raises(ValueError):
        R.philox_uniform(np.zeros(2, np.uint64), np.zeros(3, np.uint64), 0)


def test_philox_statistics():
    n = 200_000
    u = R.philox_uniform(123, 0, np.arange(n))
    assert abs(u.mean() - 0.5) < 0.005
    assert abs(u.var() - 1 / 12) < 0.002
    z0, z1 = R.philox_normal2(123, np.arange(n), 9)
    for z in (z0, z1):
        assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs(np.corrcoef(z0, z1)[0, 1]) < 0.01
    # different streams and seeds are unrelated
    a, b = R.philox_uniform(1, 0, np.arange(n)), R.philox_uniform(1, 1, np.arange(n))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.01
    assert abs(np.corrcoef(a, R.philox_uniform(2, 0, np.arange(n)))[0, 1]) < 0.01


def test_philox_device_matches_host(device_only):
    s = np.arange(100, dtype=np.uint64) * np.uint64(977)
    d = R.philox_uniform(xp.asarray(s), 3, 4)
    np.testing.assert_array_equal(host(d), R.philox_uniform(s, 3, 4))
    with pytest.raises(TypeError):
        R.philox_uniform(xp.asarray(s), np.arange(100), 4)


# --------------------------------------------------------------------------- random streams


@pytest.fixture
def numpy_backend():
    """The process generator follows the active backend; these tests read NumPy results."""
    with xp.use_backend("numpy"):
        yield


def test_get_rng(on_backend):
    g1, g2 = R.get_rng(5), R.get_rng(5)
    np.testing.assert_array_equal(host(g1.random(4)), host(g2.random(4)))
    assert xp.get_array_backend(R.get_rng(1).random(3)) == on_backend


def test_random_streams_reproducible_and_rank_independent(numpy_backend):
    a, b, c = R.RandomStreams(), R.RandomStreams(), R.RandomStreams()
    assert "not seeded" in repr(a)
    a.seed(42, rank=0)
    b.seed(42, rank=0)
    c.seed(42, rank=1)
    x, y, z = a.normal(size=1000, rng=None), b.normal(size=1000), c.normal(size=1000)
    np.testing.assert_array_equal(x, y)
    assert abs(np.corrcoef(x, z)[0, 1]) < 0.15
    assert "42" in repr(a) and "PCG64" in repr(a)
    assert R.random_streams is not a and isinstance(R.random_streams, R.RandomStreams)


def test_random_streams_seed_resets_and_seeds_numpy_global(numpy_backend):
    s = R.RandomStreams()
    s.seed(7)
    first = s.random(5)
    g1 = np.random.random(3)
    s.seed(7)
    np.testing.assert_array_equal(s.random(5), first)  # cached generator dropped
    np.testing.assert_array_equal(np.random.random(3), g1)  # np.random seeded from the stream
    assert s.generator("numpy") is s.generator("numpy")


@pytest.mark.parametrize("name", R.BIT_GENERATORS)
def test_bit_generators(name, numpy_backend):
    s = R.RandomStreams()
    s.seed(3, bit_generator=name)
    gen = s.generator("numpy")
    assert type(gen.bit_generator).__name__ == name
    assert name in repr(s)


def test_random_streams_errors_and_draws(numpy_backend):
    s = R.RandomStreams()
    with pytest.raises(ValueError):
        s.seed(1, bit_generator="XORWOW")
    with pytest.raises(ValueError):
        s.generator("torch")
    s.seed(None)
    assert s.standard_normal(size=3).shape == (3,)
    u = s.uniform(2.0, 3.0, size=100)
    assert ((u >= 2) & (u < 3)).all()
    own = s.make_generator(seed=5)
    np.testing.assert_array_equal(own.random(3), np.random.default_rng(5).random(3))
    assert s.make_generator() is s.generator()
    n = s.normal(10.0, 0.0, size=4)
    np.testing.assert_array_equal(n, 10.0)
    assert tuple(R.BIT_GENERATORS) == ("MT19937", "PCG64", "PCG64DXSM", "Philox", "SFC64")


def test_random_streams_on_device(device_only):
    s = R.RandomStreams()
    s.seed(11)
    x = s.normal(size=10)
    assert xp.get_array_backend(x) == "cupy"
    s.seed(11)
    np.testing.assert_array_equal(host(s.normal(size=10)), host(x))
    u = s.uniform(1.0, 2.0, size=5)
    assert ((host(u) >= 1) & (host(u) < 2)).all()


def test_philox_cupy_code_path_on_the_fake(device_only, monkeypatch):
    """The real-GPU path (vectorised CuPy arithmetic) gives the host's numbers on the fake."""
    from cunumpy import _backend

    if not _backend.fake_cupy_active():
        pytest.skip("on a real GPU this path runs in every other test")
    s = np.arange(64, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    d = xp.asarray(s)
    monkeypatch.setattr(_backend, "fake_cupy_active", lambda: False)
    np.testing.assert_array_equal(host(R.philox_uniform(d, 5, 6)), R.philox_uniform(s, 5, 6))
    _u0, u1 = R.philox_uniform2(d, 5, 6)
    np.testing.assert_array_equal(host(u1), R.philox_uniform2(s, 5, 6)[1])
    np.testing.assert_allclose(host(R.philox_normal(d, 5, 6)), R.philox_normal(s, 5, 6), rtol=1e-14, atol=1e-14)
    ctr = np.array([c for c, _, _ in KAT], np.uint32)
    out = R.philox4x32_10(
        xp.asarray(ctr),
        xp.asarray(np.array([k[0] for _, k, _ in KAT], np.uint32)),
        xp.asarray(np.array([k[1] for _, k, _ in KAT], np.uint32)),
    )
    assert host(out).tolist() == [list(e) for _, _, e in KAT]
