"""Grading a class in shards, as Slurm, Kubernetes and GitHub Actions run the templates in
deploy/, then merging: the same gradebook as one `kata grade` of the whole class.

Each shard runs the template's own command, as a separate process, with the variables its
engine gives a task (and the template sets); the course and the submissions sit where the
template expects its volume or checkout.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from kata.cli import cli
from kata.course import load_course
from kata.instructor import gradebook, students
from kata.instructor.shards import Shard, ShardError, parse_shard

from .helpers import MINI, REPO

DEPLOY = REPO / "deploy"
SOLVED = {f.name: f.read_text() for f in (MINI / "solutions").glob("*.py")}
STUBS = {f.name: f.read_text() for f in (MINI / "exercises").glob("*.py")}
KEY_REUSE = SOLVED["01_demo.py"].replace(
    "first, second = jax.random.split(key)", "first = second = key"
)
# Twelve submissions of every kind a class hands in (none loops: this is about merging).
CLASS = {
    "ada": SOLVED,
    "bo": SOLVED,
    "cy": {**STUBS, "02_other.py": SOLVED["02_other.py"]},
    "di": {"02_other.py": SOLVED["02_other.py"]},
    "ed": {**SOLVED, "01_demo.py": "def double(x)\n    return x\n"},
    "fi": {**SOLVED, "02_other.py": "def answer():\n    return 41\n"},
    "gu": {},
    "hal": {**SOLVED, "01_demo.py": KEY_REUSE},
    "ivy": STUBS,
    "jo": {"01_demo.py": SOLVED["01_demo.py"]},
}
ZIPPED = {"ken": SOLVED}  # a .zip
NESTED = {"lu": SOLVED}  # files a few folders down
PATH_PREFIX = "/data"  # where grade-job.yaml mounts the class's volume
MERGE_SECONDS = 120
SHARD_SECONDS = 600


def make_class(data: Path) -> None:
    """data/course (the course's manifest and checks) and data/submissions, as the
    templates expect them on a volume or in a checkout."""
    course = data / "course"
    course.mkdir(parents=True)
    shutil.copy(MINI / "course.toml", course)
    shutil.copytree(MINI / "checks", course / "checks", ignore=shutil.ignore_patterns("__*"))
    submissions = data / "submissions"
    for name, files in CLASS.items():
        (submissions / name).mkdir(parents=True)
        for filename, text in files.items():
            (submissions / name / filename).write_text(text)
    for name, files in ZIPPED.items():
        with zipfile.ZipFile(submissions / f"{name}.zip", "w") as archive:
            for filename, text in files.items():
                archive.writestr(f"{name}/{filename}", text)
    for name, files in NESTED.items():
        for filename, text in files.items():
            (submissions / name / "hw" / "kata" / filename).parent.mkdir(
                parents=True, exist_ok=True
            )
            (submissions / name / "hw" / "kata" / filename).write_text(text)
    assert len(list(submissions.iterdir())) == 12


def base_env() -> dict[str, str]:
    """This machine's environment with `kata` on the PATH, as an installed image has it."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, "PATH": path}


def run(command: list[str], env: dict[str, str], cwd: Path, seconds: float = SHARD_SECONDS):
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=seconds
    )


def run_all(commands: list[tuple[list[str], dict[str, str], Path]]) -> None:
    """Every shard at once, each its own process, as the engine starts them."""
    with ThreadPoolExecutor(max_workers=len(commands)) as pool:
        done = list(pool.map(lambda c: run(*c), commands))
    for result in done:
        assert result.returncode == 0, result.stderr


def single_run(data: Path, course: str, submissions: list[str], into: Path) -> Path:
    into.mkdir(exist_ok=True)
    result = run(
        ["kata", "--course", course, "grade", *submissions, "--out", str(into / "grades.csv"),
         "--json", str(into / "grades.json"), "--report", str(into / "report.html"),
         "--jobs", "2"],
        base_env(), data,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return into


def assert_same_gradebook(merged: Path, single: Path) -> None:
    """The CSV and the report byte for byte; the JSON but for each run's own seconds."""
    assert (merged / "grades.csv").read_bytes() == (single / "grades.csv").read_bytes()
    assert (merged / "report.html").read_bytes() == (single / "report.html").read_bytes()

    def without_seconds(path: Path) -> dict:
        document = json.loads(path.read_text())
        for entry in document["submissions"]:
            entry.pop("seconds")
        return document

    assert without_seconds(merged / "grades.json") == without_seconds(single / "grades.json")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("volume") / "data"
    make_class(root)
    return root


@pytest.fixture(scope="module")
def single(data, tmp_path_factory) -> Path:
    """One `kata grade` of the whole class, by absolute paths (the volume's)."""
    submissions = sorted(str(p) for p in (data / "submissions").iterdir())
    return single_run(data, str(data / "course"), submissions, tmp_path_factory.mktemp("single"))


# Slurm: a job array of 3 ------------------------------------------------------------------


def slurm_env(data: Path, partials: Path, task: int, tasks: int) -> dict[str, str]:
    return base_env() | {
        # What sbatch --array=0-(tasks-1) gives each task (Slurm 20.11+) ...
        "SLURM_JOB_ID": str(5000 + task),
        "SLURM_ARRAY_JOB_ID": "5000",
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_COUNT": str(tasks),
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": str(tasks - 1),
        "SLURM_ARRAY_TASK_STEP": "1",
        "SLURM_CPUS_PER_TASK": "2",
        "SLURM_JOB_NAME": "kata-grade",
        # ... and what the instructor exports, as grade.sbatch's header says.
        "KATA_COURSE": str(data / "course"),
        "KATA_SUBMISSIONS": str(data / "submissions"),
        "KATA_PARTIALS": str(partials),
    }


@pytest.mark.slow
def test_slurm_array_of_3_merges_to_the_single_run(data, single, tmp_path):
    partials = tmp_path / "partials"
    script = str(DEPLOY / "slurm" / "grade.sbatch")
    run_all([(["bash", script], slurm_env(data, partials, task, 3), tmp_path) for task in range(3)])
    assert sorted(p.name for p in partials.glob("*.json")) == [f"shard-{n}.json" for n in range(3)]
    merged = tmp_path / "results"
    merged.mkdir()
    env = base_env() | {"KATA_PARTIALS": str(partials), "KATA_RESULTS": str(merged)}
    result = run(["bash", str(DEPLOY / "slurm" / "merge.sbatch")], env, tmp_path, MERGE_SECONDS)
    assert result.returncode == 0, result.stderr
    assert_same_gradebook(merged, single)


# Kubernetes: an Indexed Job of 4 ----------------------------------------------------------


def manifest(name: str) -> dict:
    return yaml.safe_load((DEPLOY / "kubernetes" / name).read_text())


def pod_command(job: dict, data: Path, index: int | None) -> tuple[list[str], dict[str, str]]:
    """The container's command and environment as the kubelet runs them, the volume
    mounted at `data` rather than /data."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"].replace(PATH_PREFIX, str(data), 1) for e in container["env"]}
    if index is not None:  # set by the Job controller in each pod of an Indexed Job
        env["JOB_COMPLETION_INDEX"] = str(index)
        env["HOSTNAME"] = f"{job['metadata']['name']}-{index}-x7k2p"
    return container["command"] + container["args"], base_env() | env


@pytest.fixture(scope="module")
def kubernetes_partials(data) -> Path:
    """The Indexed Job's 4 pods, each its own process, writing to the volume's partials/."""
    job = manifest("grade-job.yaml")
    completions = job["spec"]["completions"]
    assert completions == 4
    shards = [pod_command(job, data, index) for index in range(completions)]
    run_all([(command, env, data) for command, env in shards])
    return data / "partials"


@pytest.mark.slow
def test_kubernetes_indexed_job_of_4_merges_to_the_single_run(data, single, kubernetes_partials):
    command, env = pod_command(manifest("merge-job.yaml"), data, None)
    result = run(command, env, data, MERGE_SECONDS)
    assert result.returncode == 0, result.stderr
    assert_same_gradebook(data, single)
    # Every submission in exactly one shard, each shard its stable share.
    partials = [json.loads((kubernetes_partials / f"shard-{n}.json").read_text()) for n in range(4)]
    chosen = [set(p["shard"]["submissions"]) for p in partials]
    everyone = {students.submission_id(p) for p in (data / "submissions").iterdir()}
    assert set().union(*chosen) == everyone and [len(ids) for ids in chosen] == [3, 3, 3, 3]
    for number, ids in enumerate(chosen, 1):
        assert ids == set(Shard(number, 4).pick(everyone))


@pytest.fixture
def four_partials(kubernetes_partials, tmp_path) -> Path:
    """A copy of the Indexed Job's partials, to break."""
    copy = tmp_path / "partials"
    shutil.copytree(kubernetes_partials, copy)
    return copy


def merge(*partials: Path, out: Path) -> object:
    return CliRunner().invoke(
        cli, ["grade-merge", *map(str, partials), "--out", str(out / "grades.csv")]
    )


@pytest.mark.slow  # compared with the whole class graded in one run
def test_merge_names_a_missing_shard_and_a_rerun_of_it_alone_completes(
    data, single, four_partials, tmp_path
):
    for suffix in ("json", "csv"):
        (four_partials / f"shard-2.{suffix}").unlink()
    refused = merge(*sorted(four_partials.glob("*.json")), out=tmp_path)
    assert refused.exit_code == 2
    assert "shards missing: 3/4" in refused.output and "Traceback" not in refused.output
    # The dead pod's index again, alone.
    command, env = pod_command(manifest("grade-job.yaml"), data, 2)
    env["KATA_PARTIALS"] = str(four_partials)
    result = run(command, env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert merge(*sorted(four_partials.glob("*.json")), out=tmp_path).exit_code == 0
    assert (tmp_path / "grades.csv").read_bytes() == (single / "grades.csv").read_bytes()


def test_merge_refuses_a_shard_given_twice(four_partials, tmp_path):
    shutil.copy(four_partials / "shard-1.json", four_partials / "again.json")
    refused = merge(*sorted(four_partials.glob("*.json")), out=tmp_path)
    assert refused.exit_code == 2 and "shards given twice (shard 2/4:" in refused.output
    assert "again.json" in refused.output and "shard-1.json" in refused.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d["course"].update(digest="0" * 16), "different courses"),
        (lambda d: d.update(kata="0.0.1"), "different kata versions"),
        (lambda d: d["shard"].update(count=5), "shards of different runs"),
        (lambda d: d.update(roster={"digest": "0" * 16}), "different rosters"),
        (lambda d: d["submissions"].pop(), "is not finished"),
    ],
)
def test_merge_refuses_partials_that_do_not_belong_together(four_partials, tmp_path, change, said):
    path = four_partials / "shard-3.json"
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    refused = merge(*sorted(four_partials.glob("*.json")), out=tmp_path)
    assert refused.exit_code == 2 and said in refused.output, refused.output
    assert not (tmp_path / "grades.csv").exists()


# GitHub Actions: a matrix of 4 and a merge job ----------------------------------------------


def workflow() -> dict:
    return yaml.safe_load((DEPLOY / "github" / "kata-grade.yml").read_text())


def expand(text: str, context: dict[str, str]) -> str:
    """GitHub's `${{ expression }}` for the few the workflow uses."""
    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: str(context[m[1]]), text)


def step_command(step: dict, context: dict[str, str], workspace: Path):
    env = {name: expand(str(value), context) for name, value in step.get("env", {}).items()}
    script = expand(step["run"], context)
    # How Actions runs a `run:` step on Linux: bash --noprofile --norc -eo pipefail {0}.
    return ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], base_env() | env


@pytest.mark.slow
def test_github_matrix_of_4_merges_to_the_single_run(data, tmp_path):
    # The checkout: the class's repository, course/ and submissions/ at its top.
    workspace = tmp_path / "workspace"
    shutil.copytree(data / "course", workspace / "course")
    shutil.copytree(data / "submissions", workspace / "submissions")
    jobs = workflow()["jobs"]
    shards = jobs["grade"]["strategy"]["matrix"]["shard"]
    (grade_step,) = [
        s for s in jobs["grade"]["steps"] if "kata" in s.get("run", "") and "grade" in s["run"]
    ]
    commands = []
    for index, shard in enumerate(shards):
        context = {
            "strategy.job-index": index,
            "strategy.job-total": len(shards),
            "matrix.shard": shard,
        }
        commands.append((*step_command(grade_step, context, workspace), workspace))
    run_all(commands)
    # download-artifact with merge-multiple: every shard's files in one partials/ folder.
    (merge_step,) = [s for s in jobs["merge"]["steps"] if "grade-merge" in s.get("run", "")]
    command, env = step_command(merge_step, {}, workspace)
    result = run(command, env, workspace, MERGE_SECONDS)
    assert result.returncode == 0, result.stderr
    reference = single_run(
        workspace,
        "course",
        sorted(f"submissions/{p.name}" for p in (workspace / "submissions").iterdir()),
        tmp_path / "single",
    )
    assert_same_gradebook(workspace, reference)


# The templates parse, and hold the fields that matter --------------------------------------

ENV_VAR = {
    "type": "object",
    "required": ["name", "value"],
    "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
}
CONTAINER = {
    "type": "object",
    "required": ["name", "image", "command", "args", "env", "volumeMounts"],
    "properties": {
        "name": {"type": "string"},
        "image": {"type": "string"},
        "command": {"type": "array", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        # Kubernetes refuses a number here ("cannot unmarshal number into ... string").
        "env": {"type": "array", "items": ENV_VAR},
        "volumeMounts": {
            "type": "array",
            "items": {"type": "object", "required": ["name", "mountPath"]},
        },
    },
}
JOB_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "batch/v1"},
        "kind": {"const": "Job"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["template"],
            "properties": {
                "completionMode": {"enum": ["Indexed", "NonIndexed"]},
                "completions": {"type": "integer", "minimum": 1},
                "parallelism": {"type": "integer", "minimum": 1},
                "backoffLimitPerIndex": {"type": "integer", "minimum": 0},
                "template": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {
                            "type": "object",
                            "required": ["restartPolicy", "containers", "volumes"],
                            "properties": {
                                # Indexed Jobs with backoffLimitPerIndex require Never.
                                "restartPolicy": {"const": "Never"},
                                "containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                                "volumes": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["name", "persistentVolumeClaim"],
                                    },
                                },
                            },
                        }
                    },
                },
            },
        },
    },
}
STEP = {
    "type": "object",
    "oneOf": [{"required": ["uses"]}, {"required": ["run"]}],
    "properties": {
        "uses": {"type": "string", "pattern": r"^[\w.-]+/[\w.-]+@v\d+$"},
        "run": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
        "with": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        },
    },
}
WORKFLOW_SCHEMA = {
    "type": "object",
    "required": ["name", "jobs"],
    "properties": {
        "jobs": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["runs-on", "steps"],
                "properties": {
                    "runs-on": {"type": "string"},
                    "needs": {"type": ["string", "array"]},
                    "strategy": {
                        "type": "object",
                        "required": ["matrix"],
                        "properties": {"matrix": {"type": "object", "minProperties": 1}},
                    },
                    "steps": {"type": "array", "minItems": 1, "items": STEP},
                },
            },
        }
    },
}


@pytest.mark.parametrize("name", ["grade-job.yaml", "merge-job.yaml"])
def test_the_kubernetes_manifests_fit_the_schema(name):
    job = manifest(name)
    jsonschema.validate(job, JOB_SCHEMA)
    spec = job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    mounts = {m["name"] for m in container["volumeMounts"]}
    assert mounts <= {v["name"] for v in spec["template"]["spec"]["volumes"]}
    if spec.get("completionMode") == "Indexed":
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["KATA_SHARD_COUNT"] == str(spec["completions"]), "the two must agree"


def test_the_github_workflow_fits_the_schema():
    document = workflow()
    jsonschema.validate(document, WORKFLOW_SCHEMA)
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "workflow_dispatch" in triggers
    jobs = document["jobs"]
    assert jobs["merge"]["needs"] == "grade"
    uploaded = [
        s["with"]["name"] for s in jobs["grade"]["steps"] if "upload-artifact" in s.get("uses", "")
    ]
    downloaded = [
        s["with"]["pattern"]
        for s in jobs["merge"]["steps"]
        if "download-artifact" in s.get("uses", "")
    ]
    assert uploaded == ["kata-shard-${{ matrix.shard }}"] and downloaded == ["kata-shard-*"]


def test_the_slurm_scripts_parse():
    for script in (DEPLOY / "slurm").glob("*.sbatch"):
        result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert "#SBATCH --cpus-per-task" in script.read_text()


def test_shards_are_balanced_and_stable():
    ids = [f"{n * 2654435761 % 2**64:016x}" for n in range(1000)]
    shards = [Shard(k, 7).pick(ids) for k in range(1, 8)]
    assert sorted(map(len, shards)) == [142] * 1 + [143] * 6
    assert sorted(sum(shards, [])) == sorted(ids)
    assert Shard(3, 7).pick(reversed(ids)) == shards[2], "the order given does not matter"


def test_a_roster_s_students_without_a_submission_are_dealt_to_the_shards_too(tmp_path):
    """dee, on the roster with no submission, is one of the class: exactly one shard grades
    her (as nothing submitted), and every shard names the two alices alike."""
    paths = [tmp_path / "a" / "alice", tmp_path / "b" / "alice", tmp_path / "bo.zip"]
    (tmp_path / "roster.csv").write_text("submission,name\nalice-2,Alice Two\ndee,Dee\n")
    roster = students.read_roster(tmp_path / "roster.csv")
    course = load_course(MINI)
    plans = [
        gradebook.plan_class(course, paths, tmp_path / "g.csv", None, Shard(k, 3), roster)
        for k in (1, 2, 3)
    ]
    graded = sorted(student.name for plan in plans for student in plan.todo)
    assert graded == ["alice", "alice-2", "bo", "dee"]
    assert len({plan.provenance["shard"]["class_digest"] for plan in plans}) == 1
    assert {plan.provenance["roster"]["digest"] for plan in plans} == {roster.digest}
    named = {s.name: s for plan in plans for s in plan.todo}
    assert named["dee"].path is None and named["alice-2"].roster["name"] == "Alice Two"
    assert named["alice-2"].path == paths[1] and named["bo"].not_on_roster


# Naming a shard -------------------------------------------------------------------------------


def slurm(task: int, first: int, last: int, **more: str) -> dict[str, str]:
    return {
        "SLURM_ARRAY_TASK_ID": str(task),
        "SLURM_ARRAY_TASK_MIN": str(first),
        "SLURM_ARRAY_TASK_MAX": str(last),
        "SLURM_ARRAY_TASK_COUNT": str(last - first + 1),
        **more,
    }


@pytest.mark.parametrize(
    ("text", "environ", "shard"),
    [
        ("2/4", {}, Shard(2, 4)),
        (" 4 / 4 ", {}, Shard(4, 4)),
        ("auto", slurm(0, 0, 9), Shard(1, 10)),
        ("auto", slurm(9, 0, 9), Shard(10, 10)),
        ("auto", slurm(3, 3, 3, KATA_SHARD_COUNT="10"), Shard(4, 10)),  # one task again
        ("auto", {"JOB_COMPLETION_INDEX": "2", "KATA_SHARD_COUNT": "4"}, Shard(3, 4)),
        ("auto", {"KATA_SHARD_INDEX": "0", "KATA_SHARD_COUNT": "3"}, Shard(1, 3)),
    ],
)
def test_a_shard_is_named_by_hand_or_by_its_engine(text, environ, shard):
    assert parse_shard(text, environ) == shard


@pytest.mark.parametrize(
    ("text", "environ", "said"),
    [
        ("0/4", {}, "shard 0 of 4, which does not exist"),
        ("5/4", {}, "shard 5 of 4"),
        ("two", {}, "K/N, like 2/4"),
        ("auto", {}, "no job engine's variables"),
        ("auto", slurm(1, 1, 10), "numbered from 0 (--array=0-9, not 1-10)"),
        ("auto", slurm(3, 3, 3), "numbered from 0"),  # a task run again, its count unknown
        ("auto", {"JOB_COMPLETION_INDEX": "1"}, "not KATA_SHARD_COUNT"),
        ("auto", {"JOB_COMPLETION_INDEX": "x", "KATA_SHARD_COUNT": "2"}, "whole number"),
    ],
)
def test_a_shard_that_cannot_be_named_is_one_clear_line(text, environ, said):
    with pytest.raises(ShardError, match=re.escape(said)):
        parse_shard(text, environ)


def test_grade_refuses_a_shard_without_its_json_and_a_bad_shard(tmp_path):
    folder = tmp_path / "alice"
    folder.mkdir()
    for args, said in [
        (["--shard", "1/2"], "give --json FILE"),
        (["--shard", "3/2", "--json", str(tmp_path / "p.json")], "shard 3 of 2"),
    ]:
        result = CliRunner().invoke(
            cli,
            ["--course", str(MINI), "grade", str(folder), "--out", str(tmp_path / "g.csv"), *args],
        )
        assert result.exit_code == 2 and said in result.output, result.output
