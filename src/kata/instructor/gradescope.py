"""`kata gradescope-bundle`: a ready autograder archive for Gradescope.

The archive holds `setup.sh` (makes sure a Python >= 3.11 exists and installs the pinned,
CPU-only `requirements.txt` into a virtual environment), `run_autograder` (grades
/autograder/submission and writes /autograder/results/results.json), `BUNDLE.txt` (the
image it is built for), the engine's source and the course's manifest and checks. It holds
no solutions: student code runs on that machine. AUTOGRADER_ROOT stands in for
/autograder, so the same scripts run in a test. Classroom 50's autograder
(classroom/autograder.py) uses the same archive.
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

import kata
from kata.course import Course

# The image the bundle is built for: Gradescope's default base image. Its python3 is 3.10,
# too old for kata (tomllib) and for current jax, so setup.sh brings its own Python.
GRADESCOPE_IMAGE = "Ubuntu 22.04 (Gradescope's default base image; system Python 3.10)"
PYTHON_FOR_OLD_IMAGES = "3.12"

# The name kata is installed under (pyproject.toml); its dependencies are the bundle's.
DISTRIBUTION = "kata-jax"

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once when the autograder is built. Built for: {image}.
# Tested with a Python 3.10 stand-in for that image's python3 (tests/test_platforms.py).
# It makes sure a Python >= 3.11 exists (the system's when new enough, else one installed
# with uv) and installs kata's pinned, CPU-only dependencies (requirements.txt) into a
# virtual environment; the engine itself is in source/engine.
set -euo pipefail
root="${{AUTOGRADER_ROOT:-/autograder}}"
venv="$root/kata-venv"
requirements="$root/source/requirements.txt"
system=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 0.0)
if [ "${{system%%.*}}" -eq 3 ] && [ "${{system#*.}}" -ge 11 ]; then
    echo "kata: using the system Python $system"
    python3 -m venv "$venv" || {{
        apt-get update -q && apt-get install -y -q python3-venv && python3 -m venv "$venv"
    }}
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
else
    echo "kata: the system Python is $system; installing Python {python} with uv"
    export UV_INSTALL_DIR="$root/uv" UV_PYTHON_INSTALL_DIR="$root/uv-python"
    command -v uv >/dev/null || curl -LsSf https://astral.sh/uv/install.sh | sh
    export PATH="$UV_INSTALL_DIR:$PATH"
    uv python install {python}
    uv venv --python {python} "$venv"
    uv pip install --python "$venv/bin/python" -r "$requirements"
fi
"$venv/bin/python" -c 'import jax, tomllib'  # what the grader needs: fail the build here
echo "kata: autograder ready ($("$venv/bin/python" --version))"
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
"$python" -m kata.grading.confinement
"$python" -m kata.instructor.gradescope unpack "$course" "$root/submission" "$work/files"
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


def pinned_requirements() -> list[str]:
    """kata's dependencies pinned to the versions installed here, the ones it was tested
    with; plain `jax`/`jaxlib` wheels are the CPU-only ones (no CUDA or TPU extras)."""
    from importlib.metadata import PackageNotFoundError, requires, version  # slow; only here

    try:
        listed = requires(DISTRIBUTION) or []
    except PackageNotFoundError:
        listed = []
    pinned = []
    for requirement in listed:
        if "extra ==" in requirement:
            continue
        spec, _, marker = requirement.partition(";")
        name = re.split(r"[<>=!~\[ ]", spec.strip(), maxsplit=1)[0]
        try:
            pin = f"{name}=={version(name)}"
        except PackageNotFoundError:
            pin = spec.strip()
        pinned.append(f"{pin}; {marker.strip()}" if marker else pin)
    return pinned


def bundle_info() -> str:
    return (
        f"kata autograder bundle\nBuilt for: {GRADESCOPE_IMAGE}.\n"
        "Any Ubuntu image works: setup.sh uses its python3 when it is 3.11 or newer, else\n"
        f"installs Python {PYTHON_FOR_OLD_IMAGES} with uv. Built and tested with Python "
        f"{sys.version.split()[0]} and a Python 3.10 stand-in for the image's python3.\n"
        "Gradescope defaults it fits: 10-minute limit, 768 MB of memory, half a vCPU.\n"
    )


def write_bundle(course: Course, out: Path) -> list[str]:
    """Write the archive; returns the names it holds."""
    engine = Path(kata.__file__).parent
    setup = SETUP_SH.format(image=GRADESCOPE_IMAGE, python=PYTHON_FOR_OLD_IMAGES)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        _add_text(archive, "setup.sh", setup)
        _add_text(archive, "run_autograder", RUN_AUTOGRADER)
        _add_text(archive, "requirements.txt", "\n".join(pinned_requirements()) + "\n")
        _add_text(archive, "BUNDLE.txt", bundle_info())
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
    from kata.instructor.gradebook import unpack_submission

    unpack_submission(load_course(Path(course_root)), Path(submission), Path(into))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["unpack"]:
        _unpack_main(*sys.argv[2:5])
