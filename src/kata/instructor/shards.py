"""Grading a class in shards on a job engine (Slurm, Kubernetes, GitHub Actions), and
merging the shards' partial gradebooks into the class's.

The class's submission ids (kata.instructor.gradebook.submission_id, digests of their
paths) are dealt out in digest order: shard K of N takes every N-th from the K-th. So every
shard, and a re-run of one, picks the same submissions from the same list without talking
to the others, and the shards' sizes differ by at most one (a plain digest modulo N left
the largest of 100 shards of 1,000 learners near 18 instead of 10). Each shard's JSON
gradebook says what it was: kata's version, the course's digest, the roster's (if any),
its K and N, the digest of the whole class it chose from and the ids it was given. A
roster's student with no submission is one of the class's ids too, graded by the shard
that picks it. Merging refuses partials that disagree (a shard that saw another list of
submissions or another roster, too), and names every shard missing, given twice or not
finished.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHARD_PATTERN = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
# Where a Kubernetes Indexed Job or a GitHub Actions matrix passes its shard count (and,
# for Actions, `strategy.job-index`): neither sets a variable of its own for them.
COUNT_VARIABLE = "KATA_SHARD_COUNT"
INDEX_VARIABLE = "KATA_SHARD_INDEX"


class ShardError(Exception):
    """A shard that cannot be named, or partials that cannot be merged, in one line."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`, counted from 1 (as `--shard 2/4` says it)."""

    index: int
    count: int

    def pick(self, submission_ids: Iterable[str]) -> list[str]:
        """This shard's submissions: every N-th of the class's ids in digest order, from
        the K-th. Ids are digests, so the order is the digests' order, mixed across the
        class's folders; the same list always gives the same shards, whose sizes differ
        by at most one."""
        return sorted(submission_ids)[self.index - 1 :: self.count]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, environ: Mapping[str, str] | None = None) -> Shard:
    """`K/N` (1 ≤ K ≤ N), or `auto`: the shard the job engine gave this task."""
    if text.strip() == "auto":
        return shard_from_environment(os.environ if environ is None else environ)
    match = SHARD_PATTERN.fullmatch(text)
    if not match:
        raise ShardError(f"--shard takes K/N, like 2/4, or auto; not {text!r}")
    return _shard(int(match[1]), int(match[2]), f"--shard {text.strip()}")


def shard_from_environment(environ: Mapping[str, str]) -> Shard:
    """The shard from the engine's own variables: a Slurm array task's id, a Kubernetes
    Indexed Job's JOB_COMPLETION_INDEX, or KATA_SHARD_INDEX (a GitHub Actions matrix's
    `strategy.job-index`). Each counts from 0. The count is the Slurm array's size, or
    KATA_SHARD_COUNT (which the Job and the workflow set, and which a Slurm task run again
    on its own needs, its array then being of one)."""
    if "SLURM_ARRAY_TASK_ID" in environ:
        index = _number(environ, "SLURM_ARRAY_TASK_ID") + 1
        if COUNT_VARIABLE in environ:
            return _shard(index, _number(environ, COUNT_VARIABLE), "SLURM_ARRAY_TASK_ID")
        count = _number(environ, "SLURM_ARRAY_TASK_COUNT")
        first = _number(environ, "SLURM_ARRAY_TASK_MIN", 0)
        last = _number(environ, "SLURM_ARRAY_TASK_MAX", count - 1)
        if (first, last) != (0, count - 1):
            raise ShardError(
                f"--shard auto takes a whole Slurm array numbered from 0 (--array=0-{count - 1}"
                f", not {first}-{last}); to run some of its tasks again, set "
                f"{COUNT_VARIABLE} to the number of shards"
            )
        return _shard(index, count, "SLURM_ARRAY_TASK_ID")
    for index_variable in ("JOB_COMPLETION_INDEX", INDEX_VARIABLE):
        if index_variable in environ:
            if COUNT_VARIABLE not in environ:
                raise ShardError(
                    f"--shard auto found {index_variable} but not {COUNT_VARIABLE}: set it "
                    "to the number of shards (the Job's completions, the matrix's size)"
                )
            index = _number(environ, index_variable) + 1
            return _shard(index, _number(environ, COUNT_VARIABLE), index_variable)
    raise ShardError(
        "--shard auto found no job engine's variables (SLURM_ARRAY_TASK_ID, "
        f"JOB_COMPLETION_INDEX, {INDEX_VARIABLE}); give --shard K/N"
    )


def _number(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(text or "")
    except ValueError:
        raise ShardError(f"{name} should be a whole number, not {text!r}") from None


def _shard(index: int, count: int, where: str) -> Shard:
    if count < 1 or not 1 <= index <= count:
        raise ShardError(f"{where} names shard {index} of {count}, which does not exist")
    return Shard(index, count)


# Merging --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Merged:
    """The class's gradebook put back together: its provenance and every submission."""

    provenance: dict[str, Any]
    entries: list[dict[str, Any]]


def merge_partials(paths: list[Path]) -> Merged:
    """The partial gradebooks of every shard of one class, as one; ShardError names what
    does not fit: another course or kata, another class, a shard missing, given twice or
    not finished."""
    partials = {path: _read_partial(path) for path in paths}
    _refuse_strangers(partials)
    first = next(iter(partials.values()))
    count = first["shard"]["count"]
    by_index: dict[int, list[Path]] = {}
    for path, partial in partials.items():
        by_index.setdefault(partial["shard"]["index"], []).append(path)
    twice = {index: found for index, found in by_index.items() if len(found) > 1}
    if twice:
        named = "; ".join(
            f"shard {index}/{count}: {', '.join(map(str, found))}"
            for index, found in sorted(twice.items())
        )
        raise ShardError(f"shards given twice ({named}); give each shard's gradebook once")
    missing = [index for index in range(1, count + 1) if index not in by_index]
    if missing:
        listed = ", ".join(f"{index}/{count}" for index in missing)
        raise ShardError(
            f"shards missing: {listed}; run each with `kata grade --shard K/{count}` "
            "(--resume continues one that stopped) and merge again"
        )
    entries: list[dict[str, Any]] = []
    for path, partial in partials.items():
        assigned = partial["shard"]["submissions"]
        graded = {e.get("id") for e in partial["submissions"]}
        if not set(assigned) <= graded:
            shard = partial["shard"]
            raise ShardError(
                f"shard {shard['index']}/{count} ({path}) is not finished: "
                f"{len(set(assigned) & graded)} of {len(assigned)} submissions graded; "
                "re-run it with --resume and merge again"
            )
        entries += [e for e in partial["submissions"] if e.get("id") in set(assigned)]
    whole = {
        **first["shard"],
        "index": 1,
        "count": 1,
        "submissions": sorted(e["id"] for e in entries),
    }
    provenance = {
        "kata": first["kata"],
        "course": first["course"],
        "roster": first.get("roster"),
        "shard": whole,
    }
    return Merged(provenance, entries)


def _refuse_strangers(partials: dict[Path, dict[str, Any]]) -> None:
    """ShardError unless every partial comes from one kata, course and roster, and from
    one run (one shard count, one class)."""
    first_path, first = next(iter(partials.items()))
    for path, partial in partials.items():
        for key, what in (("kata", "kata version"), ("course", "course"), ("roster", "roster")):
            if partial.get(key) != first.get(key):
                raise ShardError(
                    f"{path} and {first_path} come from different {what}s "
                    f"({_describe(partial.get(key))} and {_describe(first.get(key))}); merge "
                    "one class's shards, graded by one kata"
                )
        shard, first_shard = partial["shard"], first["shard"]
        if (shard["count"], shard["class_digest"]) != (
            first_shard["count"],
            first_shard["class_digest"],
        ):
            raise ShardError(
                f"{path} and {first_path} are shards of different runs (other shard counts "
                "or submission lists); give every shard the same submissions and N"
            )


def _read_partial(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ShardError(f"cannot read {path}: {error}") from None
    needed = {"kata", "course", "shard", "submissions"}
    if not isinstance(document, dict) or not needed <= set(document):
        raise ShardError(
            f"{path} is not a JSON gradebook of `kata grade --json` (from this kata or newer)"
        )
    return document


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        title = f"{value['title']}, " if "title" in value else ""
        return f"{title}digest {value.get('digest')}"
    return "none" if value is None else str(value)
