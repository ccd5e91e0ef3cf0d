"""The judge's events pipe (kata.handoffs.events_pipe): whole lines, and an over-long one is
the run's loss, never the grader's memory."""

import os
import threading

import pytest

from kata.handoffs.events_pipe import LINE_LIMIT, EventsPipe, LineTooLong, with_descriptor


def test_lines_come_whole_however_they_were_written():
    pipe = EventsPipe()
    os.write(pipe.write_fd, b'{"a": 1}\n{"b"')
    assert pipe.lines() == ['{"a": 1}\n']
    os.write(pipe.write_fd, b": 2}\n")
    assert pipe.lines() == ['{"b": 2}\n']
    pipe.close()


def test_a_line_past_the_limit_is_refused_without_being_kept():
    pipe = EventsPipe()
    block = b"x" * 2**20

    def flood():  # 64 MiB without a newline, as fast as the pipe takes it
        try:
            for _ in range(64):
                os.write(pipe.write_fd, block)
        except OSError:
            pass

    writer = threading.Thread(target=flood)
    writer.start()
    with pytest.raises(LineTooLong):
        while True:
            pipe.lines()
            assert len(pipe.pending) <= LINE_LIMIT + 65536
    pipe.close()
    writer.join()


def test_a_warm_run_names_the_descriptor_it_got():
    args = ["checks/test_01.py", "--kata-events=fd:7", "-q"]
    assert with_descriptor(args, 12) == ["checks/test_01.py", "--kata-events=fd:12", "-q"]
