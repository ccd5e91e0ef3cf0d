"""The fingerprint of the grader's own functions in the learner's process
(kata.isolation.integrity): its check over everything at once, run on every reply, says
"unchanged" only where the namespaces, compared one by one, find nothing changed; each
way a function can be replaced or edited in place is named."""

import sys
import types

import pytest

from kata.isolation.integrity import Fingerprint

PROBE = "kata._fingerprint_probe"  # a name the fingerprint watches (kata.*)


def _other():
    return "other"


def _module():
    module = types.ModuleType(PROBE)
    exec(  # the module under test, as a learner's process would find it
        """
def plain():
    return 1

def with_defaults(a=1):
    return a

def with_keywords(*, k=1):
    return k

def _closing(value):
    def closed():
        return value
    return closed

closed = _closing(1)

def _not_yet():
    def reads_later():
        return later
    if False:
        later = 1
    return reads_later

reads_later = _not_yet()

class Holder:
    def method(self):
        return 1
""",
        module.__dict__,
    )
    module.Holder.__module__ = PROBE
    return module


def _replace_plain(module):
    module.plain = _other


def _delete_plain(module):
    del module.plain


def _edit_code(module):
    module.with_defaults.__code__ = _other.__code__


def _edit_defaults(module):
    module.with_defaults.__defaults__ = (2,)


def _replace_keywords(module):
    module.with_keywords.__kwdefaults__ = {"k": 2}


def _edit_keyword_in_place(module):
    module.with_keywords.__kwdefaults__["k"] = object()


def _add_keyword_in_place(module):
    module.with_keywords.__kwdefaults__["extra"] = 2


def _edit_cell(module):
    module.closed.__closure__[0].cell_contents = _other


def _empty_cell(module):
    del module.closed.__closure__[0].cell_contents


def _fill_empty_cell(module):
    module.reads_later.__closure__[0].cell_contents = 5


def _replace_method(module):
    module.Holder.method = _other


EDITS = {
    "plain": _replace_plain,
    "plain, gone": _delete_plain,
    "with_defaults": _edit_code,
    "with_defaults, defaults": _edit_defaults,
    "with_keywords": _replace_keywords,
    "with_keywords, a keyword in place": _edit_keyword_in_place,
    "with_keywords, a keyword added": _add_keyword_in_place,
    "closed": _edit_cell,
    "closed, emptied": _empty_cell,
    "reads_later": _fill_empty_cell,
    "Holder.method": _replace_method,
}


@pytest.fixture
def probe():
    module = _module()
    sys.modules[PROBE] = module
    yield module
    del sys.modules[PROBE]


def test_nothing_changed_reads_unchanged(probe):
    fingerprint = Fingerprint.take()
    assert fingerprint.all_at_once.unchanged()
    assert fingerprint.changed() == []


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_each_edit_is_seen_at_once_and_named(probe, edit):
    fingerprint = Fingerprint.take()
    EDITS[edit](probe)
    assert not fingerprint.all_at_once.unchanged()
    name = edit.split(",")[0]
    assert f"{PROBE}.{name}" in fingerprint.changed()
