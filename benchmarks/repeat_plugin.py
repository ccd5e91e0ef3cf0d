"""A pytest plugin for benchmarks: runs each selected check KATA_REPEAT times.

Each run's outcome, duration and notes (the measured speedup) go as a JSON line to the
file named by KATA_REPEAT_LOG.
"""

import json
import os
import time

from _pytest.runner import runtestprotocol


def pytest_runtest_protocol(item, nextitem):
    repeat = int(os.environ.get("KATA_REPEAT", "1"))
    with open(os.environ["KATA_REPEAT_LOG"], "a", encoding="utf-8") as log:
        for _ in range(repeat):
            item.user_properties.clear()
            started = time.perf_counter()
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            seconds = time.perf_counter() - started
            passed = all(r.passed for r in reports)
            notes = [str(v) for k, v in item.user_properties if k == "kata_note"]
            log.write(
                json.dumps(
                    {"check": item.name, "passed": passed, "seconds": seconds, "notes": notes}
                )
                + "\n"
            )
            log.flush()
    return True
