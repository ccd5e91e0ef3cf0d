#!/usr/bin/env bash
# Verify the course on a machine with an accelerator (a TPU VM, a GPU box), with no network:
# install kata and what the machine lacks from a folder of wheels, then time opening the chip
# and a first and warm checks (where a warm 07's time goes, check by check), grade with the
# chip held by another process (one that has run an operation on it), grade a program that
# never ends on the chip alone and the reference right after it, run `kata doctor`, `kata
# verify`, the known wrong answers of 02, 05, 07, 08, 12, 15 and 17, and print every speed
# line of the solved course (17's TFLOP/s among them). One command; its output is benchmarks/README.md's "On a TPU" (and
# "On a GPU"). Run from a checkout of the commit the wheels were built from.
#
#   tools/verify_on_accelerator.sh WHEELS [SITE]
#
# WHEELS, made on a machine with the package index (../shared/accelerators.md lists what a
# TPU VM lacks; add what yours does):
#   python3 -m pip wheel --no-deps -w WHEELS .
#   python3 -m pip download --no-deps -d WHEELS equinox jaxtyping wadler-lindig optax \
#       click pytest-timeout flatbuffers packaging absl-py
# They go into SITE (default /tmp/kata-site), after the machine's own packages on the path,
# so its JAX and libtpu (or CUDA plugin) stay the ones used.
set -uo pipefail

wheels=${1:?usage: tools/verify_on_accelerator.sh WHEELS [SITE]}
site=${2:-/tmp/kata-site}
repo=$(cd "$(dirname "$0")/.." && pwd)
failed=()

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
run() {  # run a step's command, timed; remember it if it fails
    local name=$1
    shift
    step "$name"
    local started=$SECONDS
    "$@" || failed+=("$name")
    printf -- '-- %s: %d s\n' "$name" $((SECONDS - started))
}

shopt -s nullglob
found=("$wheels"/*.whl)
if [ ${#found[@]} -eq 0 ]; then
    echo "no wheels in $wheels: see the top of $0 for how to make them" >&2
    exit 2
fi
PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps \
    --target "$site" "${found[@]}" || exit 2
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$site" PATH="$site/bin:$PATH"
cd "$repo" || exit 2

step "machine"
python3 - <<'EOF'
import importlib.metadata as metadata, platform
import kata
from kata.accelerators import installed_accelerator

print(platform.platform(), "· Python", platform.python_version())
print("kata from", kata.__file__)
for name in ("jax", "jaxlib", "libtpu", "jax-cuda13-plugin", "optax", "equinox"):
    try:
        print(f"{name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"{name}: not installed")
print("accelerator runtime:", installed_accelerator() or "none")
EOF

step "opening the chip, by itself (no process of kata's holds it yet)"
pkill -f kata.servers.chip_holder; pkill -f kata.servers.worker; sleep 1
python3 -c '
import time
began = time.perf_counter()
import jax
imported = time.perf_counter()
device = jax.devices()[0]
print(f"import jax {imported - began:.2f} s, then jax.devices() {time.perf_counter() - imported:.2f} s: {device.device_kind}")
'

step "latency: a first check of a solved 07 (the holder opens the chip), then warm re-checks"
for what in "first 07" "warm 07" "warm 07" "warm 07" "warm 01" "warm 01"; do
    exercise=${what##* }
    TIMEFORMAT="$what: %R s" && time kata check "$exercise" --solutions >/tmp/kata-latency.txt 2>&1
    echo "exit $?"
    grep -E "×|Graded|timed" /tmp/kata-latency.txt | head -4
    sleep 3  # a learner reads the verdict: the warm grader readies its next judge meanwhile
done

step "where a warm re-check of 07 spends its time (seconds per check)"
kata check 07 --solutions --format json | python3 -c '
import json, sys

for check in json.load(sys.stdin)["exercises"][0]["checks"]:
    print("%6.2f  %s" % (check["duration"], check["name"][:80]))
'

step "a chip another process holds: one line, graded on the CPU"
pkill -f kata.servers.chip_holder; sleep 1
python3 -c 'import time, jax; jax.numpy.ones(3).block_until_ready(); print("open", flush=True); time.sleep(300)' \
    >/tmp/kata-other-holder.txt 2>&1 &
other=$!
for _ in $(seq 60); do grep -q open /tmp/kata-other-holder.txt && break; sleep 1; done
kata check 07 --solutions >/tmp/kata-held.txt 2>&1
echo "exit $? (0: the solution passed on the CPU)"
grep -E "graded on|held|×|checks passed" /tmp/kata-held.txt | head -5
kata doctor 2>&1 | grep -i -E "chip|tpu|held" || true
kill $other; wait $other 2>/dev/null; sleep 5  # the chip is free again before the next step

step "a program that never ends on the chip alone, then the reference: nothing wedged"
endless=$(mktemp -d)
cp -r course.toml exercises solutions checks "$endless"/
cat solutions/02_jit.py - >"$endless"/exercises/02_jit.py <<'EOF'


def _endless_on_the_chip(x):
    return jax.lax.platform_dependent(
        x,
        cpu=lambda x: x,
        default=lambda x: jax.lax.while_loop(
            lambda c: c[0] >= 0, lambda c: (c[0], c[1] + 1), (jnp.abs(x).sum(), x)
        )[1],
    )


fast_fn = jax.jit(lambda x: _endless_on_the_chip(slow_fn(x)))
EOF
TIMEFORMAT="endless 02: %R s" && time kata --course "$endless" check 02 >/tmp/kata-endless.txt 2>&1
echo "exit $? (0: its CPU figure stands)"
grep -E "not timed|checks passed" /tmp/kata-endless.txt | head -4
run "the reference 02 right after, timed on a fresh holder" kata check 02 --solutions

step "kata doctor"  # a finding it marks (no Landlock, say) is for the report, not a failure
kata doctor || true
run "kata verify" kata verify
# The addopts of pyproject.toml need pytest-xdist, which such a machine need not have.
run "known wrong answers of 02, 05, 07, 08, 12, 15, 17" python3 -m pytest -o addopts="" \
    -p no:cacheprovider -q tests/test_course_content.py \
    -k "wrong_answers_fail_and_right_ones_pass and (02_jit or 05_prng or 07_train_step or 08_gotchas or 12_optax or 15_sharding or 17_throughput)"

step "speed lines of the solved course (cold)"
kata check --solutions --cold --format json | python3 -c '
import json, sys

graded = json.load(sys.stdin)
print(graded["platform"]["reason"] or "graded on the platform JAX chose: " + graded["platform"]["platform"])
for exercise in graded["exercises"]:
    for check in exercise["checks"]:
        if "speedup" in check["measurements"] or any("TFLOP/s" in note for note in check["notes"]):
            print("ok  " if check["passed"] else "FAIL", exercise["id"], "·", check["name"])
            for note in check["notes"]:
                print("       ", note)
' || failed+=("speed lines")

step "summary"
if [ ${#failed[@]} -eq 0 ]; then
    echo "all steps passed"
    exit 0
fi
printf 'failed: %s\n' "${failed[@]}"
exit 1
