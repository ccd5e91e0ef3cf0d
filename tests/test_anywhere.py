"""The course outside this repository: the kata-jax wheel, `kata init` and `kata update`."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from .helpers import REPO, kata

BUILD_PARTS = (
    "pyproject.toml",
    "README.md",
    "src",
    "course.toml",
    "exercises",
    "solutions",
    "checks",
)


def _copy_sources(target: Path) -> Path:
    """The files a wheel is built from, without this checkout's build/ or caches."""
    for part in BUILD_PARTS:
        if (REPO / part).is_dir():
            shutil.copytree(REPO / part, target / part, ignore=shutil.ignore_patterns(
                "__pycache__", "*.egg-info"
            ))  # fmt: skip
        else:
            shutil.copy2(REPO / part, target / part)
    return target


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sources = _copy_sources(tmp_path_factory.mktemp("sources"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(sources)],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("kata_jax-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment, outside the repository, with the wheel installed in it
    (not editable). Its dependencies (jax, pytest, click…) are this environment's, reached
    through a .pth file, so no 80 MB jaxlib is installed again: a venv with pip plus a full
    install from a warm pip cache took 34 s + 163 s here, this one ~15 s."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "borrowed_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
         str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return venv


def _kata(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KATA_COURSE"} | {"KATA_COLD": "1"}
    return subprocess.run(
        [venv / "bin" / "kata", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def _shipped_root(venv: Path) -> Path:
    shown = subprocess.run(
        [venv / "bin" / "python", "-c", "import kata.course as c; print(c.shipped_course_root())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(shown.stdout.strip())


def test_the_wheel_holds_the_engine_and_the_course(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    engine = {
        f"kata/{p.relative_to(REPO / 'src' / 'kata')}"
        for p in (REPO / "src" / "kata").rglob("*.py")
    }
    assert engine <= names, sorted(engine - names)
    course = {
        f"kata/bundled_course/{p.relative_to(REPO)}"
        for part in ("exercises", "solutions", "checks")
        for p in (REPO / part).glob("*.py")
    }
    assert course | {"kata/bundled_course/course.toml"} <= names
    diagnosis_reads = {
        f"kata/diagnosis/{name}"
        for name in ("torch_to_jax.toml", "torch_surface.json", "error_rules.toml")
    }
    assert diagnosis_reads <= names
    assert not any("tests/" in name or "benchmarks/" in name for name in names)


@pytest.mark.slow
def test_a_learner_installs_the_wheel_and_learns_outside_the_repository(installed, tmp_path):
    shipped = _shipped_root(installed)
    assert shipped.is_relative_to(installed), shipped  # the package's copy, not this repo's

    made = _kata(installed, "init", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    course = tmp_path / "kata-course"
    assert {p.name for p in course.iterdir()} == {
        "course.toml", "exercises", "checks", "README.md", ".gitignore"
    }  # fmt: skip
    assert ".kata/" in (course / ".gitignore").read_text()
    again = _kata(installed, "init", "kata-course", cwd=tmp_path)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1, again.stderr

    upcoming = _kata(installed, "next", cwd=course)
    assert upcoming.returncode == 0 and "01_immutability" in upcoming.stdout, upcoming.stderr
    assert _kata(installed, "check", "01", cwd=course).returncode == 1
    shutil.copy(shipped / "solutions" / "01_immutability.py", course / "exercises")
    passing = _kata(installed, "check", "01", cwd=course)
    assert passing.returncode == 0, passing.stdout
    listed = _kata(installed, "list", cwd=course).stdout
    assert any("done" in line and "01_immutability" in line for line in listed.splitlines())
    shown = _kata(installed, "solution", "01", cwd=course)
    assert shown.returncode == 0 and "identical to the reference" in shown.stdout


def test_update_brings_new_checks_and_exercises_and_keeps_the_learners_files(installed, tmp_path):
    """A newer kata: the installed course gains an exercise and a changed manifest."""
    assert _kata(installed, "init", str(tmp_path / "c"), cwd=tmp_path).returncode == 0
    course = tmp_path / "c"
    mine = course / "exercises" / "02_jit.py"
    mine.write_text(mine.read_text() + "\n# my own work\n")
    before = mine.read_bytes()

    upgraded = Path(shutil.copytree(_shipped_root(installed), tmp_path / "newer"))
    manifest = upgraded / "course.toml"
    manifest.write_text(
        manifest.read_text()
        + '\n[[exercise]]\nid = "09_again"\ntitle = "Once more"\nhints = ["again"]\n'
    )
    shutil.copy(upgraded / "exercises" / "02_jit.py", upgraded / "exercises" / "09_again.py")
    shutil.copy(upgraded / "checks" / "test_02_jit.py", upgraded / "checks" / "test_09_again.py")
    # The installed kata's course is swapped for the newer one, as an upgrade would do.
    installed_course = _shipped_root(installed)
    backup = tmp_path / "installed-course"
    shutil.move(installed_course, backup)
    shutil.copytree(upgraded, installed_course)
    try:
        updated = _kata(installed, "update", cwd=course)
        stub_written_unasked = (course / "exercises" / "02_jit.new.py").exists()
        with_stubs = _kata(installed, "update", "--new-stubs", cwd=course)
    finally:
        shutil.rmtree(installed_course)
        shutil.move(backup, installed_course)

    assert updated.returncode == 0, updated.stderr
    assert mine.read_bytes() == before
    assert (course / "course.toml").read_text() == manifest.read_text()
    assert (course / "exercises" / "09_again.py").is_file()
    assert (course / "checks" / "test_09_again.py").is_file()
    assert "exercises/02_jit.py" in updated.stdout and "--new-stubs" in updated.stdout
    assert not stub_written_unasked
    assert with_stubs.returncode == 0 and mine.read_bytes() == before
    assert (course / "exercises" / "02_jit.new.py").read_bytes() == (
        upgraded / "exercises" / "02_jit.py"
    ).read_bytes()


def test_init_refuses_an_existing_course_and_update_refuses_a_clone(real_course):
    refused = kata(real_course, "init", str(real_course))
    assert refused.exit_code == 2 and "already holds a course" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    clone = kata(real_course, "update")
    assert clone.exit_code == 2 and "git pull" in clone.output


def test_a_folder_from_init_resets_to_the_shipped_stub(tmp_path):
    course = tmp_path / "learn"
    assert kata(tmp_path, "init", str(course)).exit_code == 0
    stub = course / "exercises" / "03_grad.py"
    original = stub.read_bytes()
    stub.write_text("broken")
    assert kata(course, "reset", "03").exit_code == 0
    assert stub.read_bytes() == original == (REPO / "exercises" / "03_grad.py").read_bytes()
    assert not (course / "solutions").exists()


def test_doctor_compares_a_folder_from_init_with_the_installed_course(tmp_path):
    course = tmp_path / "learn"
    assert kata(tmp_path, "init", str(course)).exit_code == 0
    intact = kata(course, "doctor")
    assert "as the installed kata ships them" in intact.output, intact.output
    with (course / "checks" / "test_04_vmap.py").open("a") as check:
        check.write("# edited\n")
    edited = kata(course, "doctor")
    assert "checks/test_04_vmap.py; `kata update` puts them back" in edited.output, edited.output
    assert "course.toml" not in edited.output.split("changed from the course")[1].split("\n")[0]


def test_the_readmes_first_install_line_works_before_kata_is_published():
    """`pip install kata-jax` fails for anyone before the package is on the index: the
    first install command a newcomer meets installs from a clone or a built wheel, and the
    published line is kept for later."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("**Install it and start a course folder**", 1)[1]
    block = block.split("```sh\n", 1)[1].split("```", 1)[0]
    first = next(line for line in block.splitlines() if line.startswith("pip install"))
    target = first.split("#")[0].split()[2]
    assert target == "." or target.startswith("./") or target.endswith(".whl"), first
    if target.startswith("./"):
        # A clone's folder is the one the block's own `git clone … FOLDER` names, never a
        # name assumed of a clone made elsewhere.
        clone = next(line for line in block.splitlines() if line.startswith("git clone"))
        assert clone.split("#")[0].split()[-1] == target.removeprefix("./"), (clone, first)
    assert "kata_jax-*.whl" in block and "pip wheel" in block, "the wheel's way in"
    assert "pip install kata-jax" in block, "the published line, for when it is"
