"""A hostile 01_demo.py: at import it tries every way out of its run it knows, and its
`double` is right only if every one of them failed (the message names those that did not).

The test fills in the constants above this text (see tests/test_hostile.py).
"""
# ruff: noqa: F821 (the constants are the test's: MARK, IPC_KEY, TCP_PORT, ...)

import ctypes
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax

LIBC = ctypes.CDLL(None, use_errno=True)
ESCAPED = []


def attack(name):
    def record(action):
        try:
            if action():
                ESCAPED.append(name)
        except OSError:
            pass
        return action

    return record


def sleeper(*extra):
    return [sys.executable, "-c", "import time; time.sleep(300)", MARK, *extra]


@attack("a deep setsid chain")
def chain():
    pid = os.fork()
    if pid == 0:
        for _ in range(20):
            if os.fork():
                os._exit(0)
            os.setsid()
        os.execv(sys.executable, sleeper())
    os.waitpid(pid, 0)


@attack("a fork bomb")
def bomb():
    if not BOMB:  # its own run fails when the bomb takes every process it may have
        return False
    program = (
        "import os, sys, time\n"
        "end = time.monotonic() + 2\n"
        "while time.monotonic() < end:\n"
        "    try:\n        os.fork()\n"
        "    except OSError:\n        time.sleep(0.05)\n"
        "time.sleep(300)\n"
    )
    subprocess.Popen([sys.executable, "-c", program, MARK], start_new_session=True)


@attack("System V shared memory")
def shared_memory():
    LIBC.shmget(IPC_KEY, 4096, 0o1000 | 0o666)


@attack("/proc shows processes outside the run")
def other_processes():
    return Path(f"/proc/{OUTER_PID}").exists()


@attack("an ancestor's environment")
def ancestors_environment():
    for entry in Path("/proc").iterdir():
        try:
            if SECRET.encode() in (entry / "environ").read_bytes():
                return True
        except OSError:
            continue
    return False


@attack("the judge's descriptors")
def judges_descriptors():
    opened = 0
    for fd in Path(f"/proc/{os.getppid()}/fd").iterdir():
        try:
            os.close(os.open(fd, os.O_WRONLY))
            opened += 1
        except OSError:
            continue
    return opened > 0


@attack("ptrace of the judge")
def trace_judge():
    return LIBC.ptrace(16, os.getppid(), None, None) == 0  # PTRACE_ATTACH


@attack("TCP")
def tcp():
    return bool(socket.create_connection(("127.0.0.1", TCP_PORT), timeout=2))


@attack("UDP")
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", UDP_PORT))
    return True


@attack("an abstract Unix socket")
def abstract_unix():
    socket.socket(socket.AF_UNIX).connect(ABSTRACT)
    return True


@attack("a Unix socket with a path")
def path_unix():
    socket.socket(socket.AF_UNIX).connect(UNIX_PATH)
    return True


@attack("the warm grader's socket")
def warm_grader():
    if not WORKER_SOCKET:
        return False
    with socket.socket(socket.AF_UNIX) as connection:
        connection.connect(WORKER_SOCKET)
        connection.sendall(b'{"stop": true, "token": ""}\n')
        return b"stopped" in connection.recv(1000)


@attack("disk held by unlinked files")
def unlinked_files():
    written, block, held = 0, b"x" * 2**20, []
    try:
        while written < 2 * SCRATCH_CAP:
            stream = open(f"held-{written}", "wb")  # noqa: SIM115
            os.unlink(stream.name)
            held.append(stream)
            stream.write(block)
            stream.flush()
            written += len(block)
    except OSError:
        pass
    return written > SCRATCH_CAP + 2**20


@attack("memory held by forked children")
def children_memory():
    hold = "import sys; b = b'x' * %d; print('held', flush=True); sys.stdin.read()"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", hold % CHILD_BYTES, MARK],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        for _ in range(4)
    ]
    printed = [child.stdout.read(4) == b"held" for child in children]
    # A child that printed may be the OOM kill a later one's allocation set off: count the
    # living once the kills have landed (as tests/test_container.py's memory-cap test does).
    time.sleep(1)
    return (
        sum(said and child.poll() is None for said, child in zip(printed, children, strict=True))
        == 4
    )


def done(call, *args, **kwargs) -> bool:
    try:
        call(*args, **kwargs)
    except OSError:
        return False
    return True


@attack("a change to the metadata of a file outside the run (its mode, its times)")
def metadata():
    """Landlock governs writing a file, not its metadata, which its owner may change: as
    root, the system's files. Each change here puts back what was there."""
    changed = []
    for path in (COURSE_FILE, sys.executable, jax.__file__):
        before = os.stat(path)
        changed.append(done(os.chmod, path, before.st_mode))
        changed.append(done(os.utime, path, ns=(before.st_atime_ns, before.st_mtime_ns)))
    return any(changed)


@attack("a reference solution")
def answers():
    for path in ANSWERS:
        try:
            Path(path).read_text()
            return True
        except OSError:
            continue
    return False


@attack("a program planted in the judge's compilation cache")
def judges_cache():
    """The run's own cache is the learner's to write; the judge's beside it is not: the
    judge would run whatever compiled program it found there under a key it asks for."""
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR")
    if not cache:
        return False
    planted = Path(cache.rstrip("/") + "-judge") / f"{MARK}-cache"
    planted.write_bytes(b"planted")
    return True


time.sleep(PAUSE)  # long enough for the test to try the warm grader meanwhile


def double(x):
    if ESCAPED:
        raise RuntimeError("escaped: " + "; ".join(ESCAPED))
    return x * 2


def draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first), jax.random.normal(second)
