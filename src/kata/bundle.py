"""`kata gradescope-bundle`: a ready autograder archive for Gradescope.

The archive holds `setup.sh` (installs kata's dependencies into a virtual environment),
`run_autograder` (grades /autograder/submission and writes /autograder/results/
results.json), the engine's source and the course's manifest and checks. It holds no
solutions: student code runs on that machine. AUTOGRADER_ROOT stands in for /autograder,
so the same script runs in a test.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import kata
from kata.course import Course

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once when the autograder is built (choose an Ubuntu 24.04 image,
# Python 3.11+). It installs kata's dependencies; the engine itself is in source/engine.
set -euo pipefail
apt-get update -q && apt-get install -y -q python3 python3-venv python3-pip
python3 -m venv /autograder/kata-venv
/autograder/kata-venv/bin/pip install --quiet {requirements}
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for each submission. It takes the student's NN_name.py files from
# the upload (however nested; nothing else), grades them with the course's own checks
# and writes results.json. AUTOGRADER_ROOT stands in for /autograder when testing it.
set -uo pipefail
root="${AUTOGRADER_ROOT:-/autograder}"
python="${KATA_PYTHON:-$root/kata-venv/bin/python}"
[ -x "$python" ] || python=python3
export PYTHONPATH="$root/source/engine${PYTHONPATH:+:$PYTHONPATH}"
course="$root/source/course"
work=$(mktemp -d)
mkdir -p "$root/results"
# Gradescope runs each submission in a container of its own; where the kernel allows it,
# kata confines it further. The line says which, in the autograder's output.
"$python" -m kata.confinement
"$python" -m kata.bundle unpack "$course" "$root/submission" "$work/files"
"$python" -m kata --course "$course" check --cold --dir "$work/files" --format gradescope \\
    > "$work/results.json"
status=$?
if [ "$status" -le 1 ] && [ -s "$work/results.json" ]; then
    cp "$work/results.json" "$root/results/results.json"
else
    message="The grader could not run (exit $status); please tell your instructor."
    printf '{"score": 0, "output": "%s"}\\n' "$message" > "$root/results/results.json"
fi
"""


def _requirements() -> list[str]:
    from importlib.metadata import PackageNotFoundError, requires  # slow; only needed here

    try:
        listed = requires("kata") or []
    except PackageNotFoundError:
        listed = []
    return [r for r in listed if "extra ==" not in r]


def write_bundle(course: Course, out: Path) -> list[str]:
    """Write the archive; returns the names it holds."""
    engine = Path(kata.__file__).parent
    quoted = " ".join(f"'{r}'" for r in _requirements())
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        _add_text(archive, "setup.sh", SETUP_SH.format(requirements=quoted))
        _add_text(archive, "run_autograder", RUN_AUTOGRADER)
        for path in sorted(engine.rglob("*.py")):
            archive.write(path, f"engine/kata/{path.relative_to(engine)}")
        archive.write(course.root / "course.toml", "course/course.toml")
        for path in sorted(course.checks_dir.rglob("*.py")):
            if "__pycache__" not in path.parts:
                archive.write(path, f"course/checks/{path.relative_to(course.checks_dir)}")
        return archive.namelist()


def _add_text(archive: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name)
    info.external_attr = 0o755 << 16  # executable, as Gradescope runs them directly
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, text)


def _unpack_main(course_root: str, submission: str, into: str) -> None:
    from kata.course import load_course
    from kata.gradebook import unpack_submission

    unpack_submission(load_course(Path(course_root)), Path(submission), Path(into))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["unpack"]:
        _unpack_main(*sys.argv[2:5])
