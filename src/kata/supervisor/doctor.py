"""`kata doctor`: what the grader runs on, and whether the course files are intact."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

from kata.course import MANIFEST, Course, CourseError, git
from kata.course_files import shipped_course
from kata.cpu_clocks import cpu_clocks
from kata.grading_platform import grading_platform, take_on
from kata.isolation import cgroups, confinement, container
from kata.learner_side.compile_counts import bytes_moved
from kata.servers import chip_holder, warm
from kata.supervisor.judge_process import grading_environment
from kata.versions import dependencies

# Shown whatever kata declares about them (ml_dtypes has no range on Python 3.12+).
PACKAGES = ("jax", "jaxlib", "optax", "equinox", "ml_dtypes", "pytest", "pytest-timeout", "click")


@dataclass(frozen=True)
class Finding:
    label: str
    value: str
    ok: bool = True


def examine(course: Course) -> list[Finding]:
    findings = [Finding("python", f"{platform.python_version()} ({platform.platform()})")]
    findings += _packages()
    findings += _backend()
    findings += _chip_holder(course)
    findings += _host_devices(course)
    findings += _course_files(course)
    findings.append(_warm_grader(course))
    findings += _evidence()
    findings.append(Finding("confinement", confinement.describe()))
    missing = container.missing_protections(confined=True)
    findings.append(Finding("container", container.describe(), ok=not missing))
    if missing:
        findings.append(
            Finding(
                "kata grade",
                f"refuses without --allow-missing-layers: no {', '.join(missing)} protection"
                + (f"; {cgroups.cgroup_advice()}" if "memory" in missing else ""),
                ok=False,
            )
        )
    return findings


def _packages() -> list[Finding]:
    """Each package's version; one outside the range kata declares says so in one line."""
    from importlib.metadata import PackageNotFoundError, version  # slow; only needed here

    from packaging.utils import canonicalize_name

    declared = {canonicalize_name(d.name): d for d in dependencies()}
    findings = []
    for package in PACKAGES:
        dependency = declared.pop(canonicalize_name(package), None)
        if dependency is not None and not dependency.supported:
            findings.append(Finding(package, dependency.problem(), ok=False))
            continue
        try:
            findings.append(Finding(package, version(package)))
        except PackageNotFoundError:
            findings.append(Finding(package, "not installed", ok=False))
    # The rest of what kata declares is listed only when it is out of range.
    findings += [
        Finding(d.name, d.problem(), ok=False) for d in declared.values() if not d.supported
    ]
    return findings


def _backend() -> list[Finding]:
    """The backend kata's processes grade on: this process takes on their platform first,
    so it never opens a chip they would not (nor fails on one another process holds)."""
    platform = grading_platform()
    take_on(platform)
    try:
        import jax

        devices = jax.devices()
    except Exception as error:  # a broken install reports here instead of crashing
        return [Finding("backend", f"JAX cannot start: {type(error).__name__}: {error}", ok=False)]
    kinds = ", ".join(
        f"{d.platform.capitalize()}Device(id={d.id}, {d.device_kind})" for d in devices
    )
    return [
        Finding(
            "backend", jax.default_backend() + (f" ({platform.reason})" if platform.reason else "")
        ),
        Finding("devices", f"{len(devices)}: {kinds}"),
    ]


def _evidence() -> list[Finding]:
    """What the judge can measure of a learner's process here: its CPU time (the clocks
    must tick) and the bytes it moved (/proc/PID/io)."""
    clocks = cpu_clocks()
    moved = bytes_moved(os.getpid()) is not None
    return [
        Finding("CPU clocks", clocks.describe(), ok=clocks.live),
        Finding(
            "bytes moved",
            "counted (/proc/PID/io)"
            if moved
            else "cannot be measured here (no /proc/PID/io): compilations count by CPU alone",
        ),
    ]


def _host_devices(course: Course) -> list[Finding]:
    """Exercises graded on CPU devices of their own (`host_devices`), whatever the backend."""
    graded = [f"{e.id} on {e.host_devices}" for e in course.exercises if e.host_devices]
    if not graded:
        return []
    return [Finding("CPU devices", f"{', '.join(graded)}, in a process of its own, on any machine")]


def _chip_holder(course: Course) -> list[Finding]:
    """Where the speed checks are timed on the machine's chip: whether kata's holder of it
    runs (kata.servers.chip_holder)."""
    chip = grading_platform().chip
    if chip is None:
        return []
    socket_path = chip_holder.holder_socket(grading_environment(course.state_dir))
    idle = f"{chip_holder.IDLE_EXIT_SECONDS / 60:g} idle minutes"
    if chip_holder.holder_running(socket_path):
        said = f"running: it holds the {chip} and times the speed checks there, until {idle}"
    else:
        said = f"not running; the next check starts one, which holds the {chip} until {idle}"
    if chip == "GPU":
        said += f" ({chip_holder.gpu_memory(grading_environment(course.state_dir))})"
    return [Finding("chip holder", said)]


def _warm_grader(course: Course) -> Finding:
    if not warm.worker_supported():
        return Finding("warm grader", "not on this system (needs fork): every check runs cold")
    if warm.cold_requested():
        return Finding("warm grader", f"off ({warm.COLD_VARIABLE} is set)")
    env = grading_environment(course.state_dir)
    try:
        running = warm.worker_running(warm.worker_socket(course.root, env))
    except OSError as error:
        return Finding("warm grader", f"cannot run: {error}", ok=False)
    if running:
        return Finding("warm grader", "running: checks start in a fraction of a second")
    return Finding("warm grader", "not running; the next check starts one in the background")


def _course_files(course: Course) -> list[Finding]:
    findings = [Finding("course", f"{course.title} at {course.root}")]
    missing = [
        str(path.relative_to(course.root))
        for e in course.exercises
        for path in (
            course.exercises_dir / e.filename,
            course.solutions_dir / e.filename,
            course.check_file(e),
        )
        if not path.is_file()
    ]
    if missing:
        findings.append(Finding("missing files", ", ".join(missing), ok=False))
    else:
        findings.append(Finding("course files", f"{len(course.exercises)} exercises, all present"))
    if not course.ships_own_solutions:  # a folder from `kata init`
        changed = _changed_from_installed(course)
        intact = "checks and manifest", "as the installed kata ships them"
        fix = "; `kata update` puts them back"
    else:
        changed = _changed_in_git(course)
        intact = "checks and solutions", "as the course shipped them"
        fix = ""
    if changed is None:
        findings.append(Finding(intact[0], "not a git clone: cannot tell if changed"))
    elif changed:
        findings.append(Finding("changed from the course", ", ".join(changed) + fix, ok=False))
    else:
        findings.append(Finding(*intact))
    return findings


def _changed_in_git(course: Course) -> list[str] | None:
    """Course files (not the learner's exercises) that differ from git's HEAD."""
    status = git(course, "status", "--porcelain", "--", "checks", "solutions", "course.toml", "src")
    if status is None:
        return None
    return [line[3:] for line in status.splitlines() if line.strip()]


def _changed_from_installed(course: Course) -> list[str] | None:
    """The manifest and checks of a folder from `kata init` that differ from (or are
    missing next to) the installed course's; None where kata carries no course."""
    try:
        shipped = shipped_course()
    except CourseError:
        return None
    files = [MANIFEST, *(f"checks/{p.name}" for p in sorted(shipped.checks_dir.glob("*.py")))]
    return [
        name
        for name in files
        if not (course.root / name).is_file()
        or (course.root / name).read_bytes() != (shipped.root / name).read_bytes()
    ]
