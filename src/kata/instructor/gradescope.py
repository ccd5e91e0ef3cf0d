"""`kata gradescope-bundle`: a ready autograder archive for Gradescope.

The archive holds `setup.sh` (installs kata's pinned, CPU-only `requirements.txt` into a
virtual environment of the image's own Python 3.10 or newer, from the package index and
nothing else), `run_autograder` (grades /autograder/submission and writes
/autograder/results/results.json), `BUNDLE.txt` (the image it is built for), the engine's
source with the course's stubs inside it, and the course's manifest and checks. It holds
no solutions: student code runs on that machine. AUTOGRADER_ROOT stands in for
/autograder, so the same scripts run in a test. Classroom 50's autograder
(classroom/autograder.py) uses the same archive.

`python -m kata.instructor.gradescope grade COURSE UPLOAD RESULTS` is what run_autograder
runs: it takes the exercise files in (kata.reporting.intake), grades them, and writes
results.json whose top line says what was graded, missing, ignored and extra, with every
path relative to the upload.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import kata
from kata.course import Course, original_stub
from kata.instructor.bundle_pins import PINS, requirements_text
from kata.results import DEFAULT_LIMITS, Limits
from kata.versions import kata_requirements

# The image the bundle is built for: Gradescope's default base image, whose python3 is 3.10.
GRADESCOPE_IMAGE = "Ubuntu 22.04 (Gradescope's default base image; system Python 3.10)"
# Gradescope's default container memory: 768 MB (732 MiB), for every process in it. kata's
# own limit on what a run holds (its processes' anonymous and shared memory, a page they
# share counted once: kata.supervisor.memory.tree_held_bytes) stays under it, so a
# memory-hungry submission meets kata's message, not the container's OOM killer. Measured
# on the 16 reference solutions held to 768 MB: see docs/instructors.md, "Gradescope".
RESIDENT_LIMIT_MIB = 560
# Gradescope stops an autograder after 10 minutes by default and then writes no results at
# all: kata's budget ends every exercise (and results.json is written) well before that.
# The 12 references take 26-41 s of CPU, ~100 s of wall on half a CPU.
BUDGET_SECONDS = 480

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once when the autograder is built. Built for: {image}.
# It installs kata's pinned, CPU-only dependencies (requirements.txt, pinned for each
# Python from 3.10 on) into a virtual environment of the image's own python3, from the
# package index alone (pip); the engine itself is in source/engine. Tested in a simulation
# of that image (tests/test_gradescope.py).
set -euo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
venv="$root/kata-venv"
requirements="$root/source/requirements.txt"
version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
case "$version" in
    3.1[0-9]|3.[2-9][0-9]) echo "kata: using the image's Python $version" ;;
    *) echo "kata: needs python3 3.10 or newer; this image has $version" \
            "(choose Gradescope's Ubuntu 22.04 base image or newer)" >&2
       exit 1 ;;
esac
rm -rf "$venv"
if python3 -m venv "$venv" >/dev/null 2>&1; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
else
    # Ubuntu's python3 without the python3-venv package has no ensurepip: a virtual
    # environment without pip, filled by the image's own pip.
    rm -rf "$venv"
    python3 -m venv --without-pip "$venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
    python3 -m pip install --quiet --disable-pip-version-check --target "$site" \
        -r "$requirements"
fi
# What the grader needs, imported as it will be: fail the build here, not on a student.
PYTHONPATH="$root/source/engine" "$venv/bin/python" -c \
    'import jax, optax, pytest, pytest_timeout, click, kata.course, kata.supervisor.runner'
echo "kata: autograder ready ($("$venv/bin/python" --version))"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission. It takes the student's NN_name.py files from
# the upload (however nested, a .zip in it opened; nothing else), grades them with the
# course's own checks and writes results.json. AUTOGRADER_ROOT stands in for /autograder
# when testing it.
set -uo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="${{KATA_PYTHON:-$root/kata-venv/bin/python}}"
[ -x "$python" ] || python=python3
export PYTHONPATH="$root/source/engine${{PYTHONPATH:+:$PYTHONPATH}}"
# Each submission gets a new container: a persistent compilation cache would be written
# and never read, and a grader's cache warning must not reach the student's output.
export JAX_ENABLE_COMPILATION_CACHE=false
mkdir -p "$root/results"
# Gradescope runs each submission in a container of its own; where the kernel allows it,
# kata confines it further. The line says which, in the autograder's output.
"$python" -m kata.isolation
"$python" -m kata.instructor.gradescope grade "$root/source/course" "$root/submission" \
    "$root/results/results.json" --resident-mib {resident_mib} \
    --budget "${{KATA_BUDGET:-{budget:g}}}"
status=$?
if [ "$status" -ne 0 ] || [ ! -s "$root/results/results.json" ]; then
    message="The grader could not run (exit $status); please tell your instructor."
    printf '{{"score": 0, "output": "%s"}}\\n' "$message" > "$root/results/results.json"
fi
"""


# The course the bundle's engine carries, as a wheel's `kata/bundled_course`: its stubs alone.
BUNDLED_STUBS = "engine/kata/bundled_course"


def bundle_info() -> str:
    versions = ", ".join(sorted(PINS))
    return (
        f"kata autograder bundle\nBuilt for: {GRADESCOPE_IMAGE}.\n"
        f"Any image whose python3 is 3.10 or newer works: requirements.txt pins every package\n"
        f"for Python {versions}, and setup.sh downloads from the package index only.\n"
        f"Built with Python {sys.version.split()[0]}; tested in a simulation of Ubuntu 22.04\n"
        "(Python 3.10, 768 MB of memory, half a CPU). Gradescope defaults it fits: the\n"
        f"10-minute limit, 768 MB of memory (kata stops a run at {RESIDENT_LIMIT_MIB} MiB first)\n"
        "and half a vCPU.\n"
    )


def write_bundle(course: Course, out: Path) -> list[str]:
    """Write the archive; returns the names it holds."""
    engine = Path(kata.__file__).parent
    setup = SETUP_SH.format(image=GRADESCOPE_IMAGE)
    run = RUN_AUTOGRADER.format(resident_mib=RESIDENT_LIMIT_MIB, budget=BUDGET_SECONDS)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        _add_text(archive, "setup.sh", setup)
        _add_text(archive, "run_autograder", run)
        _add_text(archive, "requirements.txt", requirements_text(PINS, kata_requirements()))
        _add_text(archive, "BUNDLE.txt", bundle_info())
        for path in sorted(engine_files(engine)):
            archive.write(path, f"engine/kata/{path.relative_to(engine)}")
        archive.write(course.root / "course.toml", "course/course.toml")
        for path in sorted(course.checks_dir.rglob("*.py")):
            if "__pycache__" not in path.parts:
                archive.write(path, f"course/checks/{path.relative_to(course.checks_dir)}")
        stubs = {e.filename: original_stub(course, e) for e in course.exercises}
        if any(stubs.values()):
            # Where kata finds the stubs of a course folder without solutions (the
            # installed kata's own course, kata.course.original_stub), as a wheel carries
            # them: a file that is its stub as given is then told, and never run
            # (kata.reporting.intake.grade_upload). Students have them all already.
            archive.write(course.root / "course.toml", f"{BUNDLED_STUBS}/course.toml")
            for filename, stub in stubs.items():
                if stub is not None:
                    archive.writestr(f"{BUNDLED_STUBS}/exercises/{filename}", stub)
        return archive.namelist()


def engine_files(engine: Path) -> list[Path]:
    """kata's modules and the data they read (the PyTorch → JAX table the diagnosis of a
    failing check looks up, the pytest configuration of a course without one): without the
    data, a learner's error ended the judge. Never the course an installed wheel carries
    (`bundled_course`): its solutions are no student's to read, and the bundle writes its
    own, of stubs alone."""
    kinds = (".py", ".toml", ".json", ".ini")
    left_out = {"__pycache__", "bundled_course"}
    return [
        p
        for p in engine.rglob("*")
        if p.suffix in kinds and not left_out & set(p.relative_to(engine).parts)
    ]


def _add_text(archive: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o755 << 16  # executable, as Gradescope runs them directly
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, text)


def results_json(course: Course, upload: Path, limits: Limits) -> dict[str, Any]:
    """results.json for the exercise files in `upload`: one line saying what was graded,
    missing, ignored and extra, then a test per check (kata.reporting.formats), every
    path relative to the upload."""
    from kata.reporting.formats import gradescope_test, to_gradescope
    from kata.reporting.intake import grade_upload

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kata-upload-") as scratch:
        graded = grade_upload(course, upload, Path(scratch) / "files", lambda _: limits)
        document = to_gradescope(graded.grading, time.monotonic() - started)
        summary = graded.intake.summary(len(course.exercises))
        document["output"] = f"{summary}\n{document['output']}"
        if graded.intake.nothing_submitted:  # one test says it, not one "missing" per exercise
            points = sum(e.points for e in course.exercises)
            nothing = gradescope_test(
                "1", "nothing submitted", 0.0, points, output=summary, tags=[]
            )
            document["tests"] = [nothing]
        return document


def main(argv: list[str]) -> int:
    from kata.course import load_course
    from kata.reporting.outputs import write_atomically

    parser = argparse.ArgumentParser(prog="python -m kata.instructor.gradescope")
    commands = parser.add_subparsers(dest="command", required=True)
    grading = commands.add_parser("grade", help="grade an upload into results.json")
    grading.add_argument("course", type=Path)
    grading.add_argument("upload", type=Path)
    grading.add_argument("results", type=Path)
    grading.add_argument("--resident-mib", type=int, default=RESIDENT_LIMIT_MIB)
    grading.add_argument("--budget", type=float, default=BUDGET_SECONDS)
    unpacking = commands.add_parser("unpack", help="only take the exercise files in")
    unpacking.add_argument("course", type=Path)
    unpacking.add_argument("upload", type=Path)
    unpacking.add_argument("into", type=Path)
    options = parser.parse_args(argv)
    course = load_course(options.course)
    if options.command == "unpack":  # Classroom 50's autograder grades what this takes in
        from kata.reporting.intake import take_in

        print(take_in(course, options.upload, options.into).summary(len(course.exercises)))
        return 0
    limits = dataclasses.replace(
        DEFAULT_LIMITS, resident_bytes=options.resident_mib * 2**20, run_seconds=options.budget
    )
    document = results_json(course, options.upload, limits)
    write_atomically(options.results, json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
