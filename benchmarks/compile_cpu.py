"""What the kernel counts of a learner's process's CPU across one request: a recompile
against a cached call, the margin a compile count corroborated from outside would rest on.

    python benchmarks/compile_cpu.py [--cached 200] [--compiles 30]

A child process (standing for the learner's process) answers requests over a socket: a
call of one jitted function (cached), or of a new jitted function (a compilation). The
parent reads the child's CPU time from the kernel (`/proc/PID/task/*/schedstat`, every
thread, in nanoseconds) before and after each request: nothing the child says is used.

Measured here with both cores busy (load average 22): JAX 0.10.2, a cached call 0.11 ms
median, 0.36 ms at most; a recompile 38 to 47 ms. JAX 0.5.3: 0.02 ms median, 0.96 ms at
most; 23 to 29 ms. The smallest recompile costs 24 times the largest cached call.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics


def cpu_ns(pid: int) -> int:
    """The CPU time of every thread of `pid`, as the kernel counts it."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except OSError:  # a thread that ended between the listing and the read
            pass
    return total


def serve(connection: socket.socket) -> None:
    import jax
    import jax.numpy as jnp

    x = jnp.ones((3,), jnp.float32)
    cached = jax.jit(lambda x: jnp.sin(x) * 2 + 1)
    cached(x).block_until_ready()
    fresh = 0
    while op := connection.recv(1):
        if op == b"c":
            fresh += 1
            jax.jit(lambda x, n=fresh: jnp.sin(x) * n + 1)(x).block_until_ready()
        else:
            cached(x).block_until_ready()
        connection.send(b"k")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cached", type=int, default=200)
    parser.add_argument("--compiles", type=int, default=30)
    options = parser.parse_args()
    ours, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        ours.close()
        serve(theirs)
        os._exit(0)
    theirs.close()

    def request(op: bytes) -> float:
        before = cpu_ns(pid)
        ours.send(op)
        ours.recv(1)
        return (cpu_ns(pid) - before) / 1e6

    request(b"f"), request(b"c")  # the first of each pays for what is loaded once
    cached = sorted(request(b"f") for _ in range(options.cached))
    compiles = sorted(request(b"c") for _ in range(options.compiles))
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"cached call: median {statistics.median(cached):.3f} ms, max {cached[-1]:.3f} ms")
    print(f"recompile:   median {statistics.median(compiles):.1f} ms, min {compiles[0]:.1f} ms")
    print(f"margin: the smallest recompile is {compiles[0] / cached[-1]:.0f}× the largest call")
    ours.close()
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
