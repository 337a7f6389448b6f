"""``python -m ezpz.cuda_compat`` on a host where CUDA is chosen redirects nothing (recorded H200 facts).

Recorded only: the H200 host's facts (``cuda_recorded.H200_LIVE``) go through ``plan()``; the cuda plugin's
``ezpz_cuda_answers`` must then say ``redirect=False``, and the mode puts no redirection in place for that
answer. Nothing here ran on a GPU; the live check belongs in the gpu suite.
"""

from __future__ import annotations

import cuda_recorded as rec
import ezpz
from cuda_testlib import plan_with, torchrun
from ezpz.cuda_compat.session import installers_for
from ezpz.plugin_host.calls import Hooks
from ezpz_cuda import plugin


def _answers(env):
    plan, _ = plan_with(env, rec.TORCH_2_11_CU130)
    assert plan.device.candidate.device_type == "cuda" and plan.backend.name == "nccl"
    return Hooks(ezpz.hooks.get_plugin_host()).cuda_answers(plan.device.candidate, plan.build, plan.backend.name)


def test_recorded_h200_cuda_compat_mode_redirects_nothing(record, monkeypatch):
    record((rec.H200_LIVE,), rec.TORCH_2_11_CU130)
    monkeypatch.setattr(plugin, "triton_found", lambda: True)
    for env in ({}, torchrun(0, 2, 0, 2)):
        name, answers = _answers(env)
        assert name == "cuda" and answers.redirect is False
        assert "NVIDIA H200" in answers.reason and "nothing is redirected" in answers.reason
        assert installers_for(answers) == ()
