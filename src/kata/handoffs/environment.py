"""The environment variables by which kata's processes hand each other what a run needs,
each named once, here. (The switches a person sets, KATA_COLD and the like, live with what
they switch, and the README lists them.)"""

# The folder of learner files a run grades: the runner's choice, read as the judge's
# checks load each exercise (kata.learner_side.learner_file).
SOURCE_VARIABLE = "KATA_SOURCE"

# Where the judge finds the key that seals its events (kata.handoffs.seal): a pipe's read
# end (cold runs), or the key itself, put in the environment after the learner's process
# was forked (warm runs).
EVENTS_KEY_FD_VARIABLE = "KATA_EVENTS_KEY_FD"
EVENTS_KEY_VARIABLE = "KATA_EVENTS_KEY"

# The learner's starter, forked before pytest starts (kata.judge.start), as the judge finds
# it (kata.checking.learner_connection): its socket, its pid, and whether the run is
# confined, so that a learner's process started later confines itself too.
LEARNER_SOCKET_VARIABLE = "KATA_LEARNER_FD"
LEARNER_PID_VARIABLE = "KATA_LEARNER_PID"
LEARNER_CONFINED_VARIABLE = "KATA_LEARNER_CONFINED"

# The connected socket to the chip holder a judge inherits, and nothing else of the
# holder's: the token stays with the front-end that connected (kata.supervisor.runner).
CHIP_FD_VARIABLE = "KATA_CHIP_FD"
