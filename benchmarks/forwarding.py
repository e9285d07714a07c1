"""Cost of name forwarding: `xp.f(...)` against the backend namespace and plain NumPy.

Each line times one call form three ways in the same run, interleaved, and prints the
best-of-repeats per-call time and the ratios. Target: forwarding adds at most 5% over
calling the backend namespace (array_api_compat.numpy) directly.
"""

import timeit

import array_api_compat.numpy as backend
import numpy as np

import cunumpy as xp

xp.set_backend("numpy")
a = np.arange(8.0)
b = np.ones(8)
v = np.linspace(0.0, 1.0, 64)

CASES = {
    "zeros(8)": ("xp.zeros(8)", "backend.zeros(8)", "np.zeros(8)"),
    "add(a, b)": ("xp.add(a, b)", "backend.add(a, b)", "np.add(a, b)"),
    "linalg.norm(v)": ("xp.linalg.norm(v)", "backend.linalg.norm(v)", "np.linalg.norm(v)"),
    "asarray(a)": ("xp.asarray(a)", "backend.asarray(a)", "np.asarray(a)"),
}
NAMESPACE = {"xp": xp, "backend": backend, "np": np, "a": a, "b": b, "v": v}


def best_per_call(statement: str, number: int, repeat: int) -> float:
    timer = timeit.Timer(statement, globals=NAMESPACE)
    return min(timer.repeat(repeat=repeat, number=number)) / number


def main(number: int = 20000, rounds: int = 7) -> None:
    print(f"{'call':16s} {'cunumpy':>10s} {'backend':>10s} {'numpy':>10s} {'xp/backend':>11s} {'xp/numpy':>9s}")
    worst = 0.0
    for label, statements in CASES.items():
        best = [float("inf")] * 3
        # Interleave the three forms so a burst of machine noise hits all of them alike.
        for _ in range(rounds):
            for i, statement in enumerate(statements):
                best[i] = min(best[i], best_per_call(statement, number, 1))
        ours, ns, plain = best
        worst = max(worst, ours / ns)
        print(
            f"{label:16s} {ours * 1e9:8.1f}ns {ns * 1e9:8.1f}ns {plain * 1e9:8.1f}ns "
            f"{ours / ns:11.3f} {ours / plain:9.3f}"
        )
    print(f"worst xp/backend ratio: {worst:.3f} (target <= 1.05)")


if __name__ == "__main__":
    main()
