"""The Gradescope bundle in a simulation of Gradescope's default image.

Ubuntu 22.04's python3 is 3.10 and, without the python3-venv package, cannot make a
virtual environment with pip in it; the only host reachable besides the image is the
package index (pip's, as this machine configures it). The stand-in: a Python 3.10
interpreter behind a `python3` that refuses `-m venv` as Ubuntu's does, and `curl`, `wget`
and `uv` that record any call and fail. Where this process may make cgroups (root, cgroup
v1 or v2), every script runs held to Gradescope's defaults, 768 MB and half a CPU
(benchmarks/gradescope_run.py's cgroup). Then each kind of upload must give a valid
results.json with the right score and a message a student understands.

Without a Python 3.10 the module skips, saying so, except under CI=1, where it fails:
the machine that runs CI has one (KATA_TEST_PYTHON310 names it, else ~/.pyenv's or
`python3.10` on PATH). Set-up takes ~40 s with pip's wheel cache warm, each upload 5-20 s.
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from kata.cli import cli

from .helpers import MINI, REPO
from .test_grading import assert_gradescope_results

sys.path.insert(0, str(REPO / "benchmarks"))
from gradescope_run import gradescope_cgroup  # noqa: E402

pytestmark = pytest.mark.slow

UBUNTU_PYTHON3 = """#!/bin/bash
# Ubuntu 22.04's python3 without python3-venv: no ensurepip, so `-m venv` fails unless
# told --without-pip.
if [ "$1" = -m ] && [ "$2" = venv ] && [[ " $* " != *" --without-pip "* ]]; then
    echo "The virtual environment was not created successfully because ensurepip is not" \\
         "available." >&2
    exit 1
fi
exec {python} "$@"
"""
OFF_LIMITS = """#!/bin/bash
echo "$(basename "$0") $*" >> "{log}"
echo "$(basename "$0"): this image reaches only the package index" >&2
exit 6
"""


def python310() -> str | None:
    named = os.environ.get("KATA_TEST_PYTHON310")
    candidates = [named] if named else []
    candidates += sorted(str(p) for p in (Path.home() / ".pyenv/versions").glob("3.10*/bin/python"))
    candidates += [shutil.which("python3.10")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def can_make_cgroups() -> bool:
    return os.geteuid() == 0 and (
        os.access("/sys/fs/cgroup/memory", os.W_OK) or os.access("/sys/fs/cgroup", os.W_OK)
    )


@contextlib.contextmanager
def gradescope_limits():
    """Gradescope's 768 MB and half a CPU where cgroups can be made, else no limit."""
    if can_make_cgroups():
        with gradescope_cgroup() as cgroup:
            yield cgroup
    else:
        yield None


def run_in_image(image: dict, script: str, timeout: float) -> tuple[float, int]:
    """Run one of the bundle's scripts as Gradescope would: its wall time, and the peak
    memory of its cgroup (0 where there is none)."""
    with gradescope_limits() as cgroup:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", str(image["root"] / "source" / script)],
            env=image["env"],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=cgroup.join if cgroup else None,
        )
        seconds = time.monotonic() - started
        peak = cgroup.peak_bytes() if cgroup else 0
    assert done.returncode == 0, done.stdout + done.stderr
    return seconds, peak


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    python = python310()
    if python is None:
        message = "no Python 3.10 here (set KATA_TEST_PYTHON310): cannot stand in for Ubuntu 22.04"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("image")
    root, fake_bin, log = folder / "autograder", folder / "bin", folder / "off-limits.log"
    fake_bin.mkdir()
    (fake_bin / "python3").write_text(UBUNTU_PYTHON3.format(python=python))
    for name in ("curl", "wget", "uv"):
        (fake_bin / name).write_text(OFF_LIMITS.format(log=log))
    for script in fake_bin.iterdir():
        script.chmod(0o755)
    archive = folder / "autograder.zip"
    made = CliRunner().invoke(cli, ["--course", str(MINI), "gradescope-bundle", str(archive)])
    assert made.exit_code == 0, made.output
    with zipfile.ZipFile(archive) as bundle:
        bundle.extractall(root / "source")
    # What the image has: a PATH, a HOME (pip's cache: wheels downloaded once per machine).
    env = {
        "PATH": f"{fake_bin}:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(folder)),
        "AUTOGRADER_ROOT": str(root),
        "LANG": "C.UTF-8",
    }
    env |= {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    image = {"root": root, "env": env, "log": log, "timings": {}}
    seconds, peak = run_in_image(image, "setup.sh", timeout=600)
    image["timings"]["setup"] = (seconds, peak)
    yield image
    print("\nGradescope image simulation (seconds, peak MB of the cgroup):")
    for name, (seconds, peak) in image["timings"].items():
        print(f"  {name}: {seconds:.1f} s, {peak / 10**6:.0f} MB")


def test_setup_uses_the_images_python_and_only_the_package_index(image):
    root = image["root"]
    assert not image["log"].exists(), image["log"].read_text()
    version = subprocess.run(
        [str(root / "kata-venv" / "bin" / "python"), "--version"], capture_output=True, text=True
    )
    assert version.stdout.startswith("Python 3.10."), version
    requirements = (root / "source" / "requirements.txt").read_text()
    assert 'jax==0.6.2; python_version == "3.10"' in requirements
    assert 'ml_dtypes==0.6.0; python_version == "3.10"' in requirements
    for script in ("setup.sh", "run_autograder"):
        text = (root / "source" / script).read_text()
        assert "http" not in text and "curl" not in text and "uv " not in text


SOLVED = {name: (MINI / "solutions" / name).read_text() for name in ("01_demo.py", "02_other.py")}
STUBS = {name: (MINI / "exercises" / name).read_text() for name in ("01_demo.py", "02_other.py")}
# `double` grows past kata's memory limit a few MiB at a time, as a leak does; `draw` works.
HOGGING_DOUBLE = """
def double(x):
    held = []
    while True:
        held.append(bytearray(8 * 2**20))
"""


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"homework/{name}", text)
    return buffer.getvalue()


UPLOADS = {
    "full": (SOLVED, 2.0),
    "stub": (STUBS, 0.0),
    "broken": (SOLVED | {"01_demo.py": "def double(x)\n    return 2 * x\n"}, 1.0),
    "oversized": (SOLVED | {"01_demo.py": SOLVED["01_demo.py"] + "#" * 2**20}, 1.0),
    "zipped": ({"homework.zip": zipped(SOLVED)}, 2.0),
    "out_of_memory": (SOLVED | {"01_demo.py": SOLVED["01_demo.py"] + HOGGING_DOUBLE}, 1.0),
    "nothing": ({"notes.txt": "my notes"}, 0.0),
}
# What the student must read, in the results' top line or a test's output.
SAYS = {
    "full": ["Graded 2 of 2 exercise files.\n2 of 2 exercises passed"],
    "stub": ["Graded 2 of 2", "not started (the file is the stub as given)"],
    "broken": ["SyntaxError", "01_demo.py, line 1"],
    "oversized": ["Ignored: 01_demo.py (over 1024 KiB)", "not graded: your 01_demo.py is over"],
    "zipped": ["Graded 2 of 2 exercise files (from homework.zip)."],
    "out_of_memory": ["out of memory (limit "],
    "nothing": ["Nothing submitted: your upload holds none of the 2 exercise files"],
}


@pytest.mark.parametrize("kind", list(UPLOADS))
def test_an_upload_gets_its_score_and_a_message_a_student_understands(image, kind):
    files, score = UPLOADS[kind]
    root = image["root"]
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for name, content in files.items():
        path = root / "submission" / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    image["timings"][kind] = run_in_image(image, "run_autograder", timeout=300)
    text = (root / "results" / "results.json").read_text()
    document = json.loads(text)
    print(f"\n[{kind}] score {document['score']}: {document['output']}")
    for test in document["tests"]:
        if test["output"]:
            print(f"  {test['name']} ({test['score']}/{test['max_score']}): {test['output']}")
    assert_gradescope_results(document)
    assert document["score"] == score, document["output"]
    everything = document["output"] + "\n".join(t["output"] for t in document["tests"])
    for said in SAYS[kind]:
        assert said in everything, everything
    # Nothing a student cannot use: no grader paths, no commands they do not have, no
    # warnings of the grader's own.
    for unwanted in (str(root), "/tmp/", "kata reset", "Errno", "Warning", "OSError"):
        assert unwanted not in text, (unwanted, text)


def test_an_upload_of_stubs_or_of_nothing_runs_no_check(tmp_path, monkeypatch):
    """What run_autograder writes for them, without the engine running a check: each
    check of a stub as given not run and worth nothing; nothing submitted, said once."""
    from kata.course import load_course
    from kata.instructor.gradescope import results_json
    from kata.reporting.scoring import AS_GIVEN
    from kata.results import DEFAULT_LIMITS
    from kata.supervisor import runner

    asked, grade = [], runner.grade

    def recorded(course, exercises, *args, **kwargs):
        asked.append([e.id for e in exercises])
        return grade(course, exercises, *args, **kwargs)

    monkeypatch.setattr(runner, "grade", recorded)
    course = load_course(MINI)
    for name, files in {"stubs": STUBS, "nothing": {"notes.txt": "my notes"}}.items():
        (tmp_path / name).mkdir()
        for filename, text in files.items():
            (tmp_path / name / filename).write_text(text)
    stubs = results_json(course, tmp_path / "stubs", DEFAULT_LIMITS)
    nothing = results_json(course, tmp_path / "nothing", DEFAULT_LIMITS)
    assert asked == [[], []]
    for document in (stubs, nothing):
        assert_gradescope_results(document)
        assert document["score"] == 0
    assert len(stubs["tests"]) == 4 and all(t["output"].endswith(AS_GIVEN) for t in stubs["tests"])
    assert "0 of 2 exercises passed (0 of 4 checks)" in stubs["output"]
    (said,) = nothing["tests"]
    assert (said["name"], said["max_score"]) == ("nothing submitted", 2.0)
    assert said["output"].startswith("Nothing submitted") and "missing" not in nothing["output"]


def test_the_bundle_tells_a_stub_as_given_and_carries_no_solution(tmp_path):
    """The course's stubs ride inside the bundle's engine, where kata looks for those of a
    course folder without solutions, so its autograder never runs a stub's checks; an
    installed wheel's own course (its solutions among it) is never copied in."""
    from kata.instructor.gradescope import engine_files

    wheel = tmp_path / "kata"
    (wheel / "bundled_course" / "solutions").mkdir(parents=True)
    (wheel / "bundled_course" / "solutions" / "01_demo.py").write_text("the answer")
    (wheel / "course.py").write_text("")
    assert engine_files(wheel) == [wheel / "course.py"]
    archive = tmp_path / "autograder.zip"
    made = CliRunner().invoke(cli, ["--course", str(MINI), "gradescope-bundle", str(archive)])
    assert made.exit_code == 0, made.output
    with zipfile.ZipFile(archive) as bundle:
        names = bundle.namelist()
        assert not any("solutions" in name for name in names)
        bundle.extractall(tmp_path / "source")
    carried = tmp_path / "source" / "engine" / "kata" / "bundled_course" / "exercises"
    assert {p.name: p.read_text() for p in carried.iterdir()} == STUBS
    upload = tmp_path / "upload"
    upload.mkdir()
    for name, text in STUBS.items():
        (upload / name).write_text(text)
    results = tmp_path / "results.json"
    grade = [sys.executable, "-m", "kata.instructor.gradescope", "grade"]
    grade += [str(tmp_path / "source" / "course"), str(upload), str(results)]
    engine = {"PYTHONPATH": str(tmp_path / "source" / "engine")}
    done = subprocess.run(grade, env={**os.environ, **engine}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    tests = json.loads(results.read_text())["tests"]
    assert len(tests) == 4 and all(t["output"].endswith("stub as given)") for t in tests)


def test_the_bundle_carries_every_file_the_wheel_ships_with_kata():
    """Each data file of kata's packages (pyproject.toml's package-data), wherever in the
    package it sits: a moved table once left the judge without it, and every upload scored 0."""
    import tomllib

    from kata.instructor.gradescope import engine_files

    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    engine = REPO / "src" / "kata"
    shipped = {
        (REPO / "src" / package.replace(".", "/") / pattern).relative_to(engine)
        for package, patterns in settings["package-data"].items()
        if package != "kata.bundled_course"
        for pattern in patterns
    }
    assert shipped <= {path.relative_to(engine) for path in engine_files(engine)}
