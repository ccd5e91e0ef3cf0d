"""How long `kata check 01_immutability` takes, against the floor of `import jax`.

Both are measured side by side in one run, interleaved round by round, after a warm-up.
Usage: python benchmarks/check_startup.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import sys

from measure import interleaved_medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    kata = [sys.executable, "-m", "kata"]
    medians = interleaved_medians(
        {
            "python -c 'import jax'": [sys.executable, "-c", "import jax"],
            "kata check 01_immutability (stub)": [*kata, "check", "01_immutability"],
            "kata check 01_immutability --solutions": [
                *kata,
                "check",
                "01_immutability",
                "--solutions",
            ],
        },
        rounds,
    )
    floor = medians["python -c 'import jax'"]
    print(f"median of {rounds} runs each, interleaved:")
    for name, seconds in medians.items():
        print(f"  {name:<42} {seconds:6.2f} s   {seconds / floor:4.2f}× the floor")


if __name__ == "__main__":
    main()
