"""Checks for 10_debugging: printing from compiled code, timing a call, a NaN-free gradient.

log_norm's lines are read from captured standard output (what a call printed in the
learner's process, jax.debug.print's lines included, is printed here after it); time_call is
judged against the check's own careful measurement of the same computation, taken by the
judge just before and after (never in the learner's process); safe_norm against NumPy in float64.
"""

import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.expect import as_float32, assert_close, random_array, show
from kata.checking.learner_calls import held_still, in_learner_process
from kata.checking.speed import FirstCallSlow, TimingWindow

# --- log_norm ---------------------------------------------------------------------------

# The curriculum asks for 4 significant digits; compared within 1e-3 relative.
PRINT_RTOL = 1e-3


def printed_norms(text, call):
    """The numbers of every `norm=<value>` line in `text`."""
    found = []
    for line in text.splitlines():
        _, marker, value = line.strip().partition("norm=")
        if not marker:
            continue
        try:
            found.append(float(value))
        except ValueError:
            hint = (
                ": that is a tracer, formatted by Python while jax.jit traces the function "
                "(by print, or by an f-string handed to jax.debug.print). Let jax.debug.print "
                'fill in the value as the compiled program runs: jax.debug.print("norm={}", n)'
                if "Trace" in value
                else ""
            )
            raise AssertionError(f"{call} printed {line.strip()!r}, not a number{hint}") from None
    return found


def vectors_with_distinct_norms(rng, count):
    return [random_array(rng, 5, scale=3.0**k) for k in range(count)]


def np_norm(x):
    return float(np.linalg.norm(np.asarray(x, np.float64)))


def vector_with_small_norm(rng):
    """A vector whose norm is 1e-5 to 4e-4: printed with too few digits ("{:.3f}" gives
    0.000), it reads as far from its norm, which a drawn vector (norm ~1 or more) never
    shows."""
    x = np.asarray(random_array(rng, 5), np.float64)
    return as_float32(x * (10.0 ** rng.uniform(-5, math.log10(4e-4)) / np.linalg.norm(x)))


def assert_printed(capsys, xs, call):
    norms = printed_norms(capsys.readouterr().out, call)
    want = sorted(np_norm(x) for x in xs)
    assert len(norms) == len(xs), (
        f"{call} printed {len(norms)} norm= line(s) for {len(xs)} call(s) ({norms}), "
        + (
            "fewer than the calls: a Python print inside jax.jit runs once, while tracing, "
            "not on every call. jax.debug.print runs every time"
            if len(norms) < len(xs)
            else "more than the calls: print one line per call"
        )
    )
    for got, expected in zip(sorted(norms), want, strict=True):
        assert math.isclose(got, expected, rel_tol=PRINT_RTOL), (
            f"{call} printed the norms {sorted(norms)}, expected {want}: the L2 norm, "
            "sqrt(sum(x**2)), of each call's x, with at least 4 significant digits (a fixed "
            'number of decimals, "{:.3f}", prints a norm of 0.0001234 as 0.000)'
        )


@pytest.mark.task("log_norm")
def test_log_norm_prints_eagerly(ex, rng, capsys):
    """log_norm: returns 2 * x and prints one line norm=<L2 norm of x>"""
    (x,) = vectors_with_distinct_norms(rng, 1)
    # A norm within PRINT_RTOL of 1 is its own square as printed, so "jax.debug.print of the
    # squared norm" passed when drawn freely (3e-4 of draws, measured): one within ten times
    # that is drawn again.
    while abs(np_norm(x) - 1) <= 10 * PRINT_RTOL:
        (x,) = vectors_with_distinct_norms(rng, 1)
    small = vector_with_small_norm(rng)
    result = ex.log_norm(x)
    small_result = ex.log_norm(small)
    assert_printed(capsys, [x, small], "log_norm(x), then log_norm of an x of small norm,")
    assert_close(result, 2.0 * np.asarray(x, np.float64), "log_norm(x)")
    assert_close(small_result, 2.0 * np.asarray(small, np.float64), "log_norm(x)", atol=1e-9)


@pytest.mark.task("log_norm")
def test_log_norm_prints_on_every_jitted_call(ex, rng, capsys):
    """log_norm: jitted and called four times, prints four lines with each call's norm"""
    xs = [*vectors_with_distinct_norms(rng, 3), vector_with_small_norm(rng)]
    # What it prints shows only where it runs: in the learner's process, on its word.
    jitted = ex.log_norm.jit().in_its_process()
    results = [jitted(x) for x in xs]
    assert_printed(capsys, xs, "jax.jit(log_norm) called 4 times")
    for x, result in zip(xs, results, strict=True):
        assert_close(result, 2.0 * np.asarray(x, np.float64), "jax.jit(log_norm)(x)")


# --- time_call --------------------------------------------------------------------------

# The timed work: `reps` rounds of a 128×128 matmul and tanh, with `reps` a traced
# argument, so the check can lengthen a run to CALIBRATED_SECONDS on any backend (a GPU
# runs one round in microseconds, as fast as a dispatch) without compiling again.
# Measured on a loaded 2-core CPU (JAX 0.10.2, load 12): a round takes 0.1-1 ms,
# dispatching a call without waiting ~25 µs, and compiling it 0.1-0.8 s. So an answer
# that forgets to wait lands below 1/100× of the careful time, one that times the
# compiling call at 9× or more even as a third of a mean of 3, both far outside the
# curriculum's 1/3×..3× window.
# 10 ms, not 5: under load a call waits for the CPU in the scheduler's slices, 10-40 ms
# more where it waits at all, which a short call cannot average out. With both cores kept
# busy and the same check graded beside it, right answers read above 3× the careful
# median in 22 of 120 attempts at 5 ms (up to 8.1×; four in a row when in step with the
# check beside), in 4 of 64 at 10 ms; the total of 10 calls read down to 4.7× at 5 ms,
# 6.4× at 10. At 20 ms the mean of 3 calls with the compiling one came down to 6.4×.
SIZE = 128
CALIBRATED_SECONDS = 10e-3
MAX_REPS = 1 << 14
# The curriculum accepts 1/3× to 3× of the check's measurement; under load a run has a
# fast mode (the CPU was free) and a slow one, so the window spans 1/3 of the fastest
# careful run to 3× their median, and an answer returning either minimum or median passes.
WINDOW = 3.0
# A reading this many times further below the window is a wrong answer, not noise: load
# only ever slows the learner's calls, and a right answer never read below 0.71× the
# fastest careful call (331 attempts, both cores busy), while a dispatch reads below
# 1/100×. One such reading ends the check.
SHORT_PROOF = 3.0
# Above the window a reading proves less: load stretches a right answer's few calls
# (its median of 3 with the compiling one is the slower of two calls), and a call of
# 0.2 s once took 1.7 s. A reading this many times further above ends the check only
# when another, at a moment of its own, is too (right answers read at most 12.7× the
# careful median in 331 attempts; a mean of 3 with the compiling call 9-55×).
LONG_PROOF = 10.0
LONG_PROOF_READINGS = 2
# Attempts before a reading outside the window fails, each after a pause longer than the
# last (0.25 s, 0.5 s, …, each scaled by a random 0.5-1.5), so that a burst of load passes
# and a competitor in step with the check (the same check, graded beside it: suites and
# `kata grade --jobs 2` grade two at once) falls out of step. The rng is unseeded.
ATTEMPTS = 6
PAUSE_SECONDS = 0.25
CAREFUL_CALLS = 5


def new_salt(rng):
    return float(rng.uniform(1.0, 2.0))


def fresh_workload(salt):
    """A jitted function never compiled before, here or in the grader's persistent cache.

    A new function object is a new program for jax.jit, and the constant `salt` (a new one
    each time, from `new_salt`) makes its compiled code new to JAX's on-disk compilation
    cache too, so the first call compiles.
    """

    def workload(x, w, reps):
        y = jax.lax.fori_loop(0, reps, lambda _, y: jnp.tanh(y @ w), x)
        return {"y": y, "total": jnp.sum(y) * salt}  # a pytree: wait on all of it

    return jax.jit(workload)


def careful_times(ex, fn, args):
    """Seconds of CAREFUL_CALLS finished calls of an already compiled `fn`, timed while
    every process of the learner's code is stopped: none can stretch the window that
    time_call's answer is judged in."""
    times = []
    with held_still(ex):
        for _ in range(CAREFUL_CALLS):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
    return times


def calibrated_twin(ex, salt, x, w):
    """The check's own compiled workload, compiled and timed here in the judge, and `reps`
    doubled until a finished call takes CALIBRATED_SECONDS.

    Judged by the fastest of the careful calls: load only ever slows a call down, so a
    stall during calibration cannot leave the run too short to tell from a dispatch.
    """
    twin = fresh_workload(salt)
    reps = 1
    jax.block_until_ready(twin(x, w, np.int32(reps)))
    while reps < MAX_REPS and min(careful_times(ex, twin, (x, w, np.int32(reps)))) < (
        CALIBRATED_SECONDS
    ):
        reps *= 2
    return twin, reps


# The first call of a fresh jitted function compiles it: 0.1-0.8 s here, which load on a
# shared machine can bring within 3× of a timed call (the stub's single first call passed
# once on JAX 0.5.3 with both cores busy). The workload time_call gets makes its first call
# unmistakable: it also waits this long, as a slow compile would.
FIRST_CALL_SECONDS = 1.0


@in_learner_process
def time_call_of_fresh_workload(ex, salt, x, w, reps, first_call_slow):
    """What time_call returned for a fresh workload, and the class names of its type."""
    workload = fresh_workload(salt)
    if first_call_slow:
        workload = FirstCallSlow(workload, FIRST_CALL_SECONDS)
    seconds = ex.time_call(workload, x, w, np.int32(reps))
    return seconds, [cls.__name__ for cls in type(seconds).__mro__]


# The last workload time_call gets sleeps this long in every run, from inside its compiled
# program (a host callback): time that passes on the wall clock while the process uses no
# CPU, as a call waiting on a device does. One round of its work costs 0.3-1 ms of the
# process's CPU (measured on a 2-core CPU, JAX 0.10.2), so a time_call that reads a CPU
# clock (time.process_time) returns a tenth of it or less, while a call timed on a wall
# clock can only take longer. Allowed 10% under it, for a wall clock (time.time) that NTP
# slews. Inside the program, the sleep and the count of runs hold however the learner
# runs fn: called, jitted again, or lowered and compiled ahead of time.
SLEEP_SECONDS = 10e-3
SLEEP_SLACK = 0.9
# The curriculum: "time at least 3 calls ... and return their median or minimum".
LEAST_CALLS = 3


@in_learner_process
def time_call_of_sleeping_workload(ex, salt, x, w):
    """What time_call returned for a fresh one-round workload that also sleeps SLEEP_SECONDS
    in every run, the class names of its type, and how many times the workload ran (that
    process's word: it only ever fails the check)."""
    runs = []

    def pause(total):
        runs.append(total)
        time.sleep(SLEEP_SECONDS)
        return np.zeros((), np.float32)

    def workload(x, w):
        y = jnp.tanh(x @ w)
        total = jnp.sum(y) * salt
        waited = jax.pure_callback(pause, jax.ShapeDtypeStruct((), jnp.float32), total)
        return {"y": y, "total": total + waited}  # the result waits for the sleep

    seconds = ex.time_call(jax.jit(workload), x, w)
    return seconds, [cls.__name__ for cls in type(seconds).__mro__], len(runs)


def timed_between_careful_runs(ex, twin, salt, x, w, reps, first_call_slow=True):
    """time_call on a fresh workload in the learner's process, between two careful
    timings of the twin here: the careful seconds (before, then after), what time_call
    returned, and the class names of its type."""
    args = (x, w, np.int32(reps))
    before = careful_times(ex, twin, args)
    seconds, kinds = time_call_of_fresh_workload(ex, salt, x, w, reps, first_call_slow)
    return before + careful_times(ex, twin, args), seconds, kinds


# The same work, this many times longer, timed the same way: a measurement follows the
# call's length, and no one number lies in both windows (1/3× to 3× of each; 16× apart,
# they meet only where a careful median exceeds 1.8× its fastest call). Its first call
# needs no extra wait: the short workload's 3× window already fails an answer that times
# the compile, and a compile of 0.1-0.8 s is within 3× of this one's calls.
LONGER = 16


class Judged(TimingWindow):
    """One attempt: time_call's seconds against the careful timings around it."""

    @property
    def summary(self):
        return (
            f"time_call: {self.seconds * 1e3:.3g} ms, careful measurement: "
            f"{self.typical * 1e3:.3g} ms (ratio {self.seconds / self.typical:.3g}; allowed "
            f"{self.low * 1e3:.3g} to {self.high * 1e3:.3g} ms; attempt {self.attempt})"
        )


def judged_time(ex, twin, salt, x, w, reps, attempt, first_call_slow=True):
    """time_call's answer for `reps` rounds against the careful timings around it."""
    careful, seconds, kinds = timed_between_careful_runs(
        ex, twin, salt, x, w, reps, first_call_slow
    )
    seconds = learner_seconds(seconds, kinds)
    typical = statistics.median(careful)
    return Judged(seconds, typical, min(careful) / WINDOW, typical * WINDOW, attempt)


def judged_in_attempts(ex, twin, rng, x, w, reps, first_call_slow=True):
    """The first attempt inside the window, the first one too short to be noise, or, after
    ATTEMPTS or LONG_PROOF_READINGS readings far too long, the one closest to the window."""
    best, far_too_long = None, 0
    for attempt in range(1, ATTEMPTS + 1):
        time.sleep(PAUSE_SECONDS * (attempt - 1) * rng.uniform(0.5, 1.5))
        judged = judged_time(ex, twin, new_salt(rng), x, w, reps, attempt, first_call_slow)
        if judged.inside or judged.seconds < judged.low / SHORT_PROOF:
            return judged
        if best is None or judged.miss < best.miss:
            best = judged
        far_too_long += judged.seconds > judged.high * LONG_PROOF
        if far_too_long == LONG_PROOF_READINGS:
            break
    return best


def learner_seconds(seconds, kinds):
    # By class names: a float subclass such as np.float64 arrives here as a NumPy array.
    assert "float" in kinds, (
        f"time_call(fn, x, w, reps) should return the seconds as a Python float, but "
        f"returned {kinds[0]}: {show(seconds)}"
    )
    seconds = float(seconds)
    assert math.isfinite(seconds) and seconds > 0, (
        f"time_call(fn, x, w, reps) returned {seconds!r}: a call takes a positive, finite time"
    )
    return seconds


# A time in another unit than seconds, read off the sleeping workload, whose every call
# lasts SLEEP_SECONDS and a little more (10-12 ms quiet; a sleeper woken late under load,
# up to 10×); timing the first call adds its compile, 0.1-0.8 s (80× at most, 300× on a
# very loaded machine). Each unit's band starts at 0.7 of its factor.
UNITS = (
    (1e9, ("nanoseconds", " (not time.perf_counter_ns(), or divide by 1e9)")),
    (1e6, ("microseconds", " (not multiplied by 1e6)")),
    (1e3, ("milliseconds", " (not multiplied by 1000)")),
)


def other_unit(ratio: float) -> tuple[str, str] | None:
    """The unit a time `ratio` times a call's length was given in, where only a unit other
    than seconds explains it: (its name, how it came about)."""
    return next((said for factor, said in UNITS if ratio >= 0.7 * factor), None)


def verdict(too_short):
    if too_short:
        return (
            "far less than one finished call takes: JAX returns as soon as the work is "
            "queued, so a clock read right after the call measures only the hand-off. Wait "
            "for each result with jax.block_until_ready (it walks any pytree of arrays)"
        )
    return (
        "far more than one call takes: did you time the first call, which also compiles "
        "(call fn once untimed first), or return a total over several calls instead of "
        "the time of one?"
    )


@pytest.mark.task("time_call")
def test_time_call_measures_one_finished_call(ex, rng, tell):
    """time_call: wall-clock seconds of one finished call, compilation excluded, 3+ calls timed"""
    x = random_array(rng, SIZE, SIZE)
    w = random_array(rng, SIZE, SIZE, scale=1 / np.sqrt(SIZE))
    # First what load cannot blur: how many runs, and a sleep no call can be shorter than.
    # Under load a CPU clock also reads well inside the window (a process waiting for the
    # CPU counts no CPU time: 0.2× the careful median with both cores busy), and would be
    # told it times too short a call, not that its clock is wrong.
    seconds, kinds, calls = time_call_of_sleeping_workload(ex, new_salt(rng), x, w)
    assert calls >= LEAST_CALLS, (
        f"time_call(fn, x, w) called fn {calls} time(s): time at least "
        f"{LEAST_CALLS} calls, each waited for, and return their median or minimum (a "
        "warm-up call first, untimed, is the usual way to leave compilation out). One timed "
        "call is at the mercy of whatever else the machine was doing just then"
    )
    seconds = learner_seconds(seconds, kinds)
    assert seconds >= SLEEP_SECONDS * SLEEP_SLACK, (
        f"time_call(fn, x, w) returned {seconds * 1e3:.3g} ms for a jitted function whose "
        f"every call sleeps {SLEEP_SECONDS * 1e3:.3g} ms (a host callback): a call takes at least "
        "that long. Is the clock a CPU clock (time.process_time, time.thread_time)? It stops "
        "while the process waits (on a sleep, on a GPU), and a call's time is wall-clock "
        "time: time.perf_counter, read once jax.block_until_ready has the result"
    )
    unit = other_unit(seconds / SLEEP_SECONDS)
    assert unit is None, (
        f"time_call(fn, x, w) returned {seconds:.4g} for a jitted function whose every call "
        f"sleeps {SLEEP_SECONDS * 1e3:.3g} ms: {seconds / SLEEP_SECONDS:.3g}× what a call "
        f"lasts, as {unit[0]} where seconds were asked would give. time.perf_counter() counts "
        f"seconds: return its differences as they are{unit[1]}"
    )
    # The same computation, compiled by the check for its own timing.
    twin, reps = calibrated_twin(ex, new_salt(rng), x, w)
    judged = judged_in_attempts(ex, twin, rng, x, w, reps)
    tell(judged.summary)
    seconds, typical = judged.seconds, judged.typical
    assert judged.inside, (
        f"time_call(fn, x, w, reps) returned {seconds * 1e3:.3g} ms for a jitted function "
        f"that takes {typical * 1e3:.3g} ms to finish ({seconds / typical:.2g}×): "
        f"{verdict(judged.too_short)}"
    )
    longer = judged_in_attempts(ex, twin, rng, x, w, reps * LONGER, first_call_slow=False)
    tell(longer.summary)
    assert longer.inside, (
        f"time_call(fn, x, w, reps) returned {seconds * 1e3:.3g} ms for a call that takes "
        f"{typical * 1e3:.3g} ms, and {longer.seconds * 1e3:.3g} ms for one {LONGER}× as long "
        f"({longer.typical * 1e3:.3g} ms): time each call itself, with a clock read before "
        "and after it, waiting for its result with jax.block_until_ready"
    )


# --- safe_norm --------------------------------------------------------------------------


# One length everywhere: eager JAX compiles every operation again for each new shape.
SIZE_OF_X = 6


def spread_vector(rng, size):
    """Entries of magnitude in [1e-3, 1e3], log-uniform, random signs."""
    magnitudes = 10.0 ** rng.uniform(-3, 3, size=size)
    return as_float32(magnitudes * rng.choice([-1.0, 1.0], size=size))


def zeros(size):
    return as_float32(np.zeros(size))


# Multiples of 2**-9 up to 2**9 in magnitude: every partial sum of them (in any order) is a
# multiple of 2**-9 below 2**11, 20 bits, which float32 holds exactly.
GRID = 2.0**-9


def cancelling_vector(rng, size):
    """Pairs a and -a (in shuffled places), a of magnitude 2**-9 to 2**9: a vector that is
    not all zeros but whose float32 sum is exactly 0, in whatever order it is summed, so an
    answer that tells the zero vector by its sum takes it for zero."""
    magnitudes = np.maximum(np.round(2.0 ** rng.uniform(-9, 9, size=size // 2) / GRID), 1)
    halves = magnitudes * GRID * rng.choice([-1.0, 1.0], size=size // 2)
    return as_float32(rng.permutation(np.concatenate([halves, -halves])))


CANCELLING = (
    " (its entries sum to 0, yet x is not the zero vector: tell the zero vector by "
    "sum(x**2) == 0, or by all(x == 0), not by sum(x) == 0)"
)


def drawn_vectors(rng):
    """Three spread vectors, then a cancelling one, each with what a message adds to it."""
    for _ in range(3):
        yield spread_vector(rng, SIZE_OF_X), ""
    yield cancelling_vector(rng, SIZE_OF_X), CANCELLING


@pytest.mark.task("safe_norm")
def test_safe_norm_value(ex, rng):
    """safe_norm: the L2 norm of x, entries 1e-3 to 1e3 in magnitude (some sum to 0), jitted"""
    norm = ex.safe_norm.jit()
    for x, note in drawn_vectors(rng):
        call = f"jax.jit(safe_norm)(x) for x = {show(x)}{note}"
        assert_close(norm(x), np_norm(x), call, rtol=1e-5)


@pytest.mark.task("safe_norm")
def test_safe_norm_gradient(ex, rng):
    """safe_norm: jax.jit(jax.grad(safe_norm))(x) is x / norm(x)"""
    grad = ex.safe_norm.grad().jit()
    for x, note in drawn_vectors(rng):
        want = np.asarray(x, np.float64) / np_norm(x)
        call = f"jax.jit(jax.grad(safe_norm))(x) for x = {show(x)}{note}"
        assert_close(grad(x), want, call, atol=1e-7)


def assert_exact_zeros(got, call, what):
    got = np.asarray(got, np.float64)
    if np.isnan(got).any():
        raise AssertionError(
            f"{call} at the zero vector is NaN{what}: sqrt's slope is infinite at 0, and the "
            "chain rule multiplies it by 0 (0 * inf = NaN) even where jnp.where then picks "
            "another branch. Keep the value sqrt sees away from 0 on the discarded branch too"
        )
    assert np.all(got == 0), (
        f"{call} at the zero vector returned {show(got)}, not exactly 0{what}: an epsilon "
        "added inside sqrt shifts the result; it must be exactly 0 there"
    )


@pytest.mark.task("safe_norm")
def test_safe_norm_at_zero(ex, rng):
    """safe_norm: at the zero vector, the value and the gradient are exactly 0, not NaN"""
    # Each program is exported for an x the judge draws, and held to the norm there: the
    # zero vector alone is a value any program of constants gets right.
    x = spread_vector(rng, SIZE_OF_X)
    value = ex.safe_norm.exported(x, reference=np_norm)
    grad = ex.safe_norm.grad().exported(
        x, reference=lambda v: np.asarray(v, np.float64) / np_norm(v)
    )
    assert_exact_zeros(value.run(zeros(SIZE_OF_X)), "jax.jit(safe_norm)(x)", "")
    assert_exact_zeros(grad.run(zeros(SIZE_OF_X)), "jax.jit(jax.grad(safe_norm))(x)", "")


@pytest.mark.task("safe_norm")
def test_safe_norm_under_jit_and_vmap(ex, rng):
    """safe_norm: under jax.jit(jax.vmap(...)), rows of zeros and others, value and gradient"""
    # A batch of its own for each program: each is exported for values its learner's
    # process has not met (docs/writing-checks.md).
    batches = []
    for _ in range(2):
        rows = [spread_vector(rng, SIZE_OF_X) for _ in range(5)]
        rows[1], rows[3] = zeros(SIZE_OF_X), zeros(SIZE_OF_X)
        batches.append(as_float32(np.stack([np.asarray(r) for r in rows])))
    norms = np.linalg.norm(np.asarray(batches[0], np.float64), axis=1)
    reference = np.asarray(batches[1], np.float64)
    lengths = np.linalg.norm(reference, axis=1)
    want_grads = reference / np.where(lengths == 0, 1.0, lengths)[:, None]
    values = ex.safe_norm.vmap().jit()(batches[0])
    grads = ex.safe_norm.grad().vmap().jit()(batches[1])
    for row in (1, 3):
        where = f" (row {row} of the batch)"
        assert_exact_zeros(values[row], "jax.jit(jax.vmap(safe_norm))(batch)", where)
        assert_exact_zeros(grads[row], "jax.jit(jax.vmap(jax.grad(safe_norm)))(batch)", where)
    assert_close(values, norms, "jax.jit(jax.vmap(safe_norm))(batch)", rtol=1e-5)
    assert_close(grads, want_grads, "jax.jit(jax.vmap(jax.grad(safe_norm)))(batch)", atol=1e-7)
