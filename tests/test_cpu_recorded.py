"""The CPU plugin on recorded machines (tests/cpu_recorded.py): probe parsing, precision policy, setup's plan.

Verified only against recorded /proc/cpuinfo text, never against this host's CPU: the outcome is the same
on an AVX2-only EPYC, an AMX Xeon or an ARM runner.
"""

from __future__ import annotations

import pytest

import ezpz
from cpu_recorded import RECORDED
from ezpz.builtin.cpu import cpu_candidate, cpu_precision_options, probe_cpu
from ezpz.errors import UnavailableError
from ezpz.policies import choose_precision

NAMES = [r.name for r in RECORDED]


@pytest.mark.parametrize("record", RECORDED, ids=NAMES)
def test_probe_reads_the_recorded_flags(record, tmp_path):
    facts = probe_cpu(str(record.write(tmp_path)), machine=record.machine)
    assert facts.machine == record.machine
    if record.cpuinfo is None:  # macOS: no /proc/cpuinfo, nothing claimed
        assert facts.flags == frozenset() and facts.model == record.machine
        return
    assert len(facts.flags) > 10  # the whole flag line, not its first word
    if "model name" in record.cpuinfo:
        assert facts.model in record.cpuinfo and facts.model != record.machine
    bf16_flags = cpu_candidate(facts).details["bf16_flags"]
    assert (bf16_flags != "none") == record.bf16


@pytest.mark.parametrize("record", RECORDED, ids=NAMES)
def test_precision_policy_on_each_recorded_cpu(record, tmp_path):
    facts = probe_cpu(str(record.write(tmp_path)), machine=record.machine)
    options = {o.dtype: o for o in cpu_precision_options(facts)}
    assert (options["bf16"].supported, options["fp16"].supported) == (record.bf16, record.fp16)
    auto = choose_precision(list(options.values()), requested="auto", device="cpu")
    if record.bf16:
        assert auto.dtype == "bf16" and auto.autocast and not auto.grad_scaler
        assert "native bf16" in auto.reason
    else:
        assert auto.dtype == "fp32" and not auto.autocast
        with pytest.raises(UnavailableError, match="no native bf16"):
            choose_precision(list(options.values()), requested="bf16", device="cpu")


@pytest.mark.parametrize("record", RECORDED, ids=NAMES)
def test_setup_plan_on_each_recorded_cpu(record, recorded_cpu):
    """The real decision path (hooks, policies, explanation) with only the CPU probe's input replaced."""
    recorded_cpu(record.name)
    plan, explanation = ezpz.hooks.plan(environ={"EZPZ_DEVICE": "cpu"})
    assert plan.amp.dtype == ("bf16" if record.bf16 else "fp32")
    assert explanation["device"].chosen == "cpu"
    text = str(explanation)
    assert ("CPU has native bf16" in text) == record.bf16
