"""What the diagnosis and the PyTorch → JAX table add to a failing check's verdict.

    python benchmarks/diagnosis_cost.py [--runs 20]

The judge imports `kata.diagnosis.diagnose` when it starts, before any check; what a failing check
pays is the diagnosis itself, the table's reads included. Each run is a fresh process (cold
caches: the first failure of a run pays for reading the table), timing the diagnosis of one
failure of every kind: a Tensor method on a tracer, a torch function on `jnp`, a torch
keyword, a message whose rows are found by their error, an error no rule knows, and every
failure after the first (warm). The limit is 50 ms for the worst of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, time
from kata.diagnosis.diagnose import Failure, diagnose
failures = {
    "tracer method": Failure(("AttributeError",), "DynamicJaxprTracer has no attribute to"),
    "jnp function": Failure(("AttributeError",), "module 'jax.numpy' has no attribute 'cat'"),
    "keyword": Failure(("TypeError",), "sum() got an unexpected keyword argument 'keepdim'"),
    "by its error": Failure(("TypeError",), "Cannot interpret '3' as a data type", "f(2, 3)"),
    "no rule": Failure(("ZeroDivisionError",), "division by zero", "return 1 / 0"),
}
times = {}
for name, failure in failures.items():
    started = time.perf_counter()
    diagnose(failure)
    times[name] = 1000 * (time.perf_counter() - started)
started = time.perf_counter()
for failure in failures.values():
    diagnose(failure)
times["warm (each)"] = 1000 * (time.perf_counter() - started) / len(failures)
print(json.dumps(times))
"""

LIMIT_MS = 50.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True,
                                  text=True, check=True).stdout)
        for _ in range(args.runs)
    ]  # fmt: skip
    worst = 0.0
    for name in runs[0]:
        values = [run[name] for run in runs]
        worst = max(worst, max(values))
        print(f"{name:<14} median {statistics.median(values):6.2f} ms   max {max(values):6.2f} ms")
    verdict = "within" if worst <= LIMIT_MS else "OVER"
    print(f"worst {worst:.1f} ms: {verdict} the {LIMIT_MS:.0f} ms limit ({args.runs} fresh runs)")


if __name__ == "__main__":
    main()
