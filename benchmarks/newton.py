"""Batched root finding: `xp.optimize.newton` against `scipy.optimize.newton`.

1M independent scalar problems `x**3 - a = 0` (and a Kepler equation), the same array `x0`
for both, timed interleaved in one run; prints the best-of-repeats time and the ratio.
Target on the NumPy backend: at most 1.1x SciPy's time. With `--fake` (or
CUNUMPY_FAKE_CUPY=1 CUNUMPY_BACKEND=cupy) the cunumpy side runs on the fake CuPy, whose
arrays are NumPy buffers behind CuPy's rules: that figure is the fake's overhead, not a
GPU's speed.

usage: python benchmarks/newton.py [--n N] [--repeat R] [--fake]
"""

import argparse
import os
import sys
import time
import warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--fake", action="store_true", help="run cunumpy on the fake CuPy")
    options = parser.parse_args()
    if options.fake:
        os.environ["CUNUMPY_FAKE_CUPY"] = "1"
        os.environ["CUNUMPY_BACKEND"] = "cupy"

    import numpy as np
    import scipy.optimize

    import cunumpy as xp

    rng = np.random.default_rng(0)
    n = options.n
    host_a = rng.uniform(1.0, 10.0, n)
    host_x0 = rng.uniform(0.5, 3.0, n)
    host_e = rng.uniform(0.0, 0.8, n)
    a, x0, e = (xp.to_cunumpy(v) for v in (host_a, host_x0, host_e))
    print(
        f"backend {xp.get_backend()} (fake CuPy: {xp.backend_info()['fake_cupy']}), {n} problems, "
        f"best of {options.repeat}; the machine may be loaded: read the ratios"
    )

    cases = {
        "cube root, Newton": (lambda x, a: x**3 - a, lambda x, a: 3.0 * x**2, "a"),
        "cube root, secant": (lambda x, a: x**3 - a, None, "a"),
        "Kepler, Newton": (lambda E, e: E - e * np.sin(E) - 1.0, lambda E, e: 1.0 - e * np.cos(E), "e"),
    }
    device_cases = {
        "cube root, Newton": (lambda x, a: x**3 - a, lambda x, a: 3.0 * x**2),
        "cube root, secant": (lambda x, a: x**3 - a, None),
        "Kepler, Newton": (lambda E, e: E - e * xp.sin(E) - 1.0, lambda E, e: 1.0 - e * xp.cos(E)),
    }
    print(f"{'problem':20s} {'cunumpy':>10s} {'scipy':>10s} {'ratio':>7s}  agree")
    worst = 0.0
    for label, (func, fprime, arg) in cases.items():
        host_arg = host_a if arg == "a" else host_e
        device_arg = a if arg == "a" else e
        dfunc, dfprime = device_cases[label]
        best_x, best_s = float("inf"), float("inf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for _ in range(options.repeat):
                start = time.perf_counter()
                ours = xp.optimize.newton(dfunc, x0, dfprime, args=(device_arg,))
                xp.synchronize()
                best_x = min(best_x, time.perf_counter() - start)
                start = time.perf_counter()
                theirs = scipy.optimize.newton(func, host_x0, fprime, args=(host_arg,))
                best_s = min(best_s, time.perf_counter() - start)
        agree = np.array_equal(xp.to_numpy(ours), theirs)
        ratio = best_x / best_s
        worst = max(worst, ratio)
        print(f"{label:20s} {best_x * 1e3:8.1f}ms {best_s * 1e3:8.1f}ms {ratio:7.2f}  {agree}")
    print(f"worst ratio {worst:.2f} (target <= 1.10 on the NumPy backend)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
