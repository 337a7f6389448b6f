"""A decision trace never lists the value it chose among the ones it rejected.

``threads: 1 intra-op thread(s)`` followed by ``not 1 thread(s): ...`` reads as a contradiction. These tests
check every decision of the traces of several real plans (``ezpz.hooks.plan`` over different launch
environments, variables and recorded torch builds), and the threads policy over a grid of facts.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ezpz
from ezpz.decisions import Decision
from ezpz.decisions import Explanation
from ezpz.testing import recorded_build
from ezpz.startup.threads import ThreadFacts, choose_threads

_VALUE = re.compile(r"[^\s:(\[]+")


def value(text: str) -> str:
    """The value a trace line names: its first word (``1`` of ``1 intra-op thread(s)``, ``cuda`` of ``cuda:0``)."""
    found = _VALUE.match(text.strip())
    return found[0] if found else text


def contradictions(explanation: Explanation) -> list[str]:
    """``topic: chosen`` / ``not alternative`` pairs where the alternative names the chosen value."""
    bad = []
    for d in explanation.decisions:
        bad += [f"{d.topic}: {d.chosen} / not {a.name}: {a.reason}" for a in d.alternatives
                if value(a.name) == value(d.chosen)]
    return bad


def test_the_check_sees_a_contradiction():
    from ezpz.facts import Alternative

    trace = Explanation(decisions=[Decision(topic="threads", chosen="1 intra-op thread(s)", reason="r",
                                            alternatives=[Alternative(name="1 thread(s)", reason="x"),
                                                          Alternative(name="2 thread(s)", reason="y")])])
    assert contradictions(trace) == ["threads: 1 intra-op thread(s) / not 1 thread(s): x"]
    assert value("cuda:0") == value("cuda [rocm]") == "cuda" and value("torch's default 2") != "2"


def _ranks_sharing_every_core() -> int:
    """As many local ranks as physical cores, so ezpz's share is one thread whatever the host."""
    from ezpz.probes.cpu import physical_cores

    return max(2, physical_cores())


def _openmpi(n: int, **extra: str) -> dict[str, str]:
    return {"OMPI_COMM_WORLD_SIZE": str(n), "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(n), "OMPI_MCA_ess_base_jobid": "1732182017", **extra}


def _torchrun(n: int, **extra: str) -> dict[str, str]:
    return {"TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "0", "RANK": "0", "WORLD_SIZE": str(n), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": str(n), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", **extra}


PLANS = {
    "one process": ({}, "cpu"),
    "one process, OMP_NUM_THREADS=1": ({"OMP_NUM_THREADS": "1"}, "cpu"),
    # The reported case: mpiexec, the user's OMP_NUM_THREADS equal to ezpz's share (one thread).
    "openmpi, OMP_NUM_THREADS=1, one core per rank": (lambda: _openmpi(_ranks_sharing_every_core(),
                                                                      OMP_NUM_THREADS="1"), "cpu"),
    "openmpi, OMP_NUM_THREADS=3": (lambda: _openmpi(2, OMP_NUM_THREADS="3"), "cpu"),
    "torchrun, 2 ranks": (lambda: _torchrun(2, OMP_NUM_THREADS="1"), "cpu"),
    "torchrun, fp32 asked": (lambda: _torchrun(2, EZPZ_PRECISION="fp32"), "cpu"),
    "cuda build, no GPU": ({}, "cuda"),
    "xpu build, no GPU": ({"EZPZ_PRECISION": "fp32"}, "xpu"),
    "gloo asked": ({"EZPZ_BACKEND": "gloo", "EZPZ_COMPILE": "aot_eager"}, "cpu"),
}


@pytest.mark.parametrize("name", list(PLANS))
def test_no_decision_rejects_its_chosen_value(name):
    environ, build = PLANS[name]
    environ = environ() if callable(environ) else environ
    _, explanation = ezpz.hooks.plan(environ=environ, build=recorded_build(build))
    assert len(explanation.decisions) >= 8
    assert not contradictions(explanation), "\n".join(contradictions(explanation))


@given(cores=st.integers(1, 256), local=st.integers(1, 16), torch_threads=st.integers(1, 256),
       host_extra=st.one_of(st.none(), st.integers(0, 64)), omp=st.one_of(st.none(), st.integers(1, 64)),
       load1=st.one_of(st.none(), st.floats(0, 512, allow_subnormal=False)),  # a fast-math torch (2.4.1's CUDA
       launcher=st.sampled_from(["single", "torchrun", "openmpi"]))          # wheel) flushes subnormals: not a load
def test_the_threads_policy_never_rejects_its_own_count(cores, local, torch_threads, host_extra, omp, load1,
                                                         launcher):
    facts = ThreadFacts(cores=cores, local_world_size=local, torch_threads=torch_threads,
                        host_cores=None if host_extra is None else cores + host_extra, launcher=launcher,
                        set_vars=() if omp is None else (("OMP_NUM_THREADS", str(omp)),), load1=load1)
    choice = choose_threads(facts)
    trace = Explanation(decisions=[Decision(topic="threads", chosen=f"{choice.threads} intra-op thread(s)",
                                            reason=choice.reason, alternatives=choice.alternatives)])
    assert not contradictions(trace), (facts, choice)
