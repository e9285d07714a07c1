"""The HostKernel flags Kernel dispatch relies on (C base and pure-Python twin): calls with
keywords and calls with a top-level ``__cuda_args__`` object take the convert path."""

import numpy as np
import pytest

from cunumpy import _reference
from cunumpy._native import core

IMPLEMENTATIONS = [pytest.param(core, id="c"), pytest.param(_reference, id="twin")]


class State:
    backend = "numpy"


class ArgumentObject:
    def __cuda_args__(self):
        return ()


class SlottedArgumentObject:
    __slots__ = ()

    def __cuda_args__(self):
        return ()


def make(impl, flags):
    class Probe(impl.HostKernel):
        pass

    impl.enable_vectorcall(Probe)
    probe = Probe()
    calls = []

    def direct(*args, **kwargs):
        calls.append(("direct", args, kwargs))
        return "direct"

    def convert(self, args, kwargs):
        calls.append(("convert", args, kwargs))
        return "convert"

    if flags is None:
        probe._configure(direct, None, (), State(), convert)
    else:
        probe._configure(direct, None, (), State(), convert, flags)
    return probe, calls


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_without_flags_keywords_go_to_the_function(impl):
    probe, _calls = make(impl, None)
    assert probe(1.0, k=2) == "direct"
    assert probe(ArgumentObject()) == "direct"
    probe, _calls = make(impl, 0)
    assert probe(1.0, k=2) == "direct"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_keyword_flag(impl):
    probe, calls = make(impl, 1)
    a = np.zeros(2)
    assert probe(a, 1.0) == "direct"
    assert probe(a, n_threads=4) == "convert"
    assert calls[-1] == ("convert", (a,), {"n_threads": 4})
    assert probe(ArgumentObject()) == "direct"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_argument_object_flag(impl):
    probe, _calls = make(impl, 2)
    assert probe(np.zeros(2), 1.0, 3, True) == "direct"
    for obj in (ArgumentObject(), SlottedArgumentObject()):
        # Seen once as a plain argument first: the answer must not be cached as a leaf.
        assert probe(np.zeros(1), obj) == "convert"
        assert probe(obj) == "convert"
    assert probe(1.0, k=ArgumentObject()) == "direct"  # positional arguments only
    probe, _calls = make(impl, 3)
    assert probe(1.0, k=2) == "convert"


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_bad_flags(impl):
    probe = impl.HostKernel()
    with pytest.raises(ValueError, match="flags"):
        probe._configure(print, None, (), State(), print, 4)
    with pytest.raises(ValueError, match="flags"):
        probe._configure(print, None, (), State(), print, -1)
    with pytest.raises(TypeError, match="flags"):
        probe._configure(print, None, (), State(), print, 1.0)
    with pytest.raises(TypeError, match="flags"):
        probe._configure(print, None, (), State(), print, True)
