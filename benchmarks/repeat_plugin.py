"""A pytest plugin for benchmarks: runs each selected check KATA_REPEAT times.

Each run's outcome, duration, notes and measured speedup go as a JSON line to the file
named by KATA_REPEAT_LOG.
"""

import json
import os
import time

from _pytest.runner import runtestprotocol

from kata.results import MEASUREMENT_PROPERTY, NOTE_PROPERTY


def pytest_runtest_protocol(item, nextitem):
    repeat = int(os.environ.get("KATA_REPEAT", "1"))
    with open(os.environ["KATA_REPEAT_LOG"], "a", encoding="utf-8") as log:
        for _ in range(repeat):
            item.user_properties.clear()
            started = time.perf_counter()
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            seconds = time.perf_counter() - started
            passed = all(r.passed for r in reports)
            notes = [str(v) for k, v in item.user_properties if k == NOTE_PROPERTY]
            measured = dict(v for k, v in item.user_properties if k == MEASUREMENT_PROPERTY)
            record = {
                "check": item.name,
                "passed": passed,
                "seconds": seconds,
                "notes": notes,
                "speedup": measured.get("speedup"),
            }
            log.write(json.dumps(record) + "\n")
            log.flush()
    return True
