"""The docs' sample outputs (docs/index.md, docs/getting-started.md) still match what the code prints.

Each sample is produced again by the same real run as ``scripts/doc_samples.py`` and compared by shape:
numbers, paths, column widths, the CPU's name, the CPU-dependent precision choice and what the torch build
shows through (its local version label, what it was built with, the device plugins' reasons for offering
nothing) are masked, so the check holds on any CPU and any torch build, while a changed line, a new or removed
line, or a renamed section fails it. The samples are CPU-only runs: where setup() would pick an accelerator,
they are skipped, saying so.
Fix a failure by running ``python scripts/doc_samples.py`` and reviewing the diff.
"""

from __future__ import annotations

import sys

import pytest

from conftest import ROOT, need_tool

sys.path.insert(0, str(ROOT / "scripts"))
import doc_samples  # noqa: E402

#: Samples that run a launcher, or whose text names the launcher ezpz would pick (torchrun when on PATH).
NEEDS = {"train-torchrun": "torchrun", "train-mpiexec": "mpiexec", "explain-mpiexec": "mpiexec",
         "launch-dry-run": "torchrun", "doctor": "torchrun"}
LAUNCHED = {"train-torchrun", "train-mpiexec", "explain-mpiexec"}


@pytest.fixture(scope="module")
def cpu_only() -> None:
    """Skip where setup() would not pick the CPU: the samples were produced CPU-only."""
    import ezpz

    the_plan, _ = ezpz.hooks.plan(environ=doc_samples.clean_env())
    if the_plan.device.candidate.device_type != "cpu":
        pytest.skip(f"the docs' samples are CPU-only runs; setup() here picks {the_plan.device.candidate.device_type}")


def _param(name: str):
    marks = [pytest.mark.launcher] if name in LAUNCHED else []
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_param(n) for n in doc_samples.SAMPLES])
def test_doc_sample_matches_what_the_code_prints(name, cpu_only):
    if name in NEEDS:
        need_tool(NEEDS[name])
    page, _ = doc_samples.SAMPLES[name]
    doc = doc_samples.blocks(page).get(name)
    assert doc is not None, f"docs/{page} has no <!-- sample: {name} --> block"
    now = doc_samples.render(name)
    assert doc_samples.shape(doc) == doc_samples.shape(now), (
        f"docs/{page} sample {name!r} no longer matches; run python scripts/doc_samples.py\n--- docs\n{doc}\n--- now\n{now}")


def test_every_page_with_samples_names_the_machine():
    for page in {p for p, _ in doc_samples.SAMPLES.values()}:
        text = (doc_samples.DOCS / page).read_text()
        label = text.split("<!-- samples-machine -->\n", 1)[1].split("\n<!-- /samples-machine -->", 1)[0]
        assert "produced by `python scripts/doc_samples.py` on " in label and "torch " in label, page


def test_shape_masks_what_varies_and_keeps_what_does_not():
    shape = doc_samples.shape
    a = "[ezpz] step    5  loss 2.1814     16.3 steps/s  (/usr/bin/torchrun)"
    assert shape(a) == shape("[ezpz] step 10 loss 0.5 9.0 steps/s  (/opt/x/torchrun)")
    assert shape(a) != shape("[ezpz] step 5 loss 2.1 16.3 samples/s (/usr/bin/torchrun)")
    bf16 = "precision: bf16 (autocast on)\n    why: auto: CPU has native bf16\n    not fp16: no\ntimeout: 300s"
    fp32 = "precision: fp32 (autocast off)\n    why: auto: no low-precision dtype\n    not bf16: no\n    not fp16: no\ntimeout: 5s"
    assert shape(bf16) == shape(fp32) and shape(bf16)[-1] == "timeout: <n>s"
    assert shape("    names: ('AMD EPYC',)") == shape("    names: ('Intel(R) Xeon(R) Platinum 8470',)")
    assert shape("device: cpu") != shape("device: cuda")


def test_shape_masks_the_torch_build_and_keeps_the_structure():
    """A CPU build against a CUDA build on the same CPU-only machine (torch 2.13.0+cpu, 2.15.0+cu132)."""
    shape = doc_samples.shape
    cpu = ["torch   2.13.0+cpu  cuda=None hip=None xpu=False mps=False distributed=True backends=gloo",
           "  torch: 2.13.0+cpu", "    why: cuda=None hip=None xpu_built=False backends=gloo",
           "      not cuda [cuda]: nvidia: torch built without CUDA (torch 2.13.0+cpu: torch.version.cuda is None)",
           "      not hpu [example-hpu]: habana: habana_frameworks not installed"]
    cuda = ["torch   2.15.0+cu132  cuda=13.2 hip=None xpu=False mps=False distributed=True backends=gloo,nccl",
            "  torch: 2.15.0", "    why: cuda=13.2 hip=None xpu_built=False backends=gloo,nccl",
            "      not cuda [cuda]: nvidia: 0 CUDA devices visible (torch.cuda.device_count() is 0; is the NVIDIA "
            "driver loaded?) [NVML unavailable: the NVML bindings are not installed (pip install 'ezpz-cuda[nvml]')]",
            "      not hpu [example-hpu]: habana: habana_frameworks not installed (set EZPZ_EXAMPLE_HPU_SIMULATE)"]
    for a, b in zip(cpu, cuda):
        assert shape(a) == shape(b), (a, b)
    assert shape(cpu[0]) != shape(cpu[0].replace("distributed=True", "distributed=False"))
    assert shape(cpu[3]) != shape(cpu[3].replace("[cuda]: nvidia", "[rocm]: amd"))  # which plugin said no: kept
    assert shape("\n".join(cpu)) != shape("\n".join(cpu[:3] + cpu[4:]))  # a missing rejection still fails


def test_the_listed_trace_topics_are_the_ones_a_plan_has():
    import re

    import ezpz
    from ezpz.testing import recorded_build

    text = (doc_samples.DOCS / "getting-started.md").read_text()
    sentence = re.search(r"The topics are always (.*?), in that order", text, re.S)[1]
    listed = re.findall(r"`(\w+)`", sentence)
    _, explanation = ezpz.hooks.plan(environ={}, build=recorded_build("cpu"))
    assert listed == [d.topic for d in explanation.decisions]
