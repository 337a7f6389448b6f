"""The pure policies on their own: the architecture table, gcnArchName parsing, backends, TunableOp."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from rocm_recorded import BUILDS, NO_RCCL, NODES, OLD_ROCM

from ezpz.errors import ConfigError, UnavailableError
from ezpz.facts import TorchBuild
from ezpz_rocm.facts import RocmFacts, base_arch, hip_release
from ezpz_rocm.policy import ARCHS, arch_info, backend_options, precision_options, tunableop_requested


@pytest.mark.parametrize(
    ("gcn", "arch"),
    [("gfx90a:sramecc+:xnack-", "gfx90a"), ("gfx942:sramecc+:xnack-", "gfx942"), ("gfx1100", "gfx1100"),
     ("gfx908:xnack+", "gfx908"), (" GFX1030 ", "gfx1030")],
)
def test_gcn_arch_name_feature_suffixes_are_stripped(gcn: str, arch: str) -> None:
    assert base_arch(gcn) == arch
    assert arch_info(gcn) is ARCHS[arch]


@pytest.mark.parametrize(
    ("hip", "release"), [("6.1.40091-a8dbc0c19", (6, 1)), ("7.2.26015-fc0010cf6a", (7, 2)), ("5.4", (5, 4)), ("", (0, 0))]
)
def test_hip_release(hip: str, release: tuple[int, int]) -> None:
    assert hip_release(hip) == release


def test_every_arch_row_cites_a_public_source() -> None:
    for arch, info in ARCHS.items():
        assert info.arch == arch and arch.startswith("gfx")
        assert info.source and all(part.strip().startswith("https://") for part in info.source.split(";")), arch
        assert info.why and info.family and info.products


def test_the_recorded_archs_are_in_the_table_with_the_expected_bf16_answer() -> None:
    expected = {"mi100": True, "mi250x": True, "mi300x": True, "rx7900xtx": True, "rx6900xt": False}
    for key, bf16 in expected.items():
        info = arch_info(NODES[key].gpus[0].gcn_arch_name)
        assert info is not None and info.bf16 is bf16, key
    assert arch_info(NODES["unknown"].gpus[0].gcn_arch_name) is None


def test_mixed_architectures_follow_the_least_capable_one() -> None:
    gpus = (*NODES["mi300x"].gpus[:1], *NODES["rx6900xt"].gpus)
    facts = RocmFacts(hip="6.4.43482", gpus=gpus, source="amdsmi", runtime_initialised=False)
    bf16, fp16 = precision_options(facts)
    assert not bf16.supported and "gfx1030" in bf16.reason
    assert fp16.supported and fp16.grad_scaler


def test_backend_options_follow_the_build() -> None:
    assert [(o.name, o.available) for o in backend_options(BUILDS["2.8.0+rocm6.4"])] == [("nccl", True), ("gloo", True)]
    assert [(o.name, o.available) for o in backend_options(NO_RCCL)] == [("nccl", False), ("gloo", True)]
    no_dist = TorchBuild(version="2.8.0+rocm6.4", hip="6.4.43482", distributed=False)
    assert all(not o.available and "torch.distributed" in o.reason for o in backend_options(no_dist))


def test_tunableop_needs_rocm_5_4() -> None:
    assert tunableop_requested({"EZPZ_ROCM_TUNABLEOP": "1"}, BUILDS["2.4.0+rocm6.1"].hip) is True
    assert tunableop_requested({}, OLD_ROCM.hip) is False
    with pytest.raises(UnavailableError) as info:
        tunableop_requested({"EZPZ_ROCM_TUNABLEOP": "1"}, OLD_ROCM.hip)
    assert info.value.name == "EZPZ_ROCM_TUNABLEOP" and "ROCm 5.4" in str(info.value)
    with pytest.raises(ConfigError):
        tunableop_requested({"EZPZ_ROCM_TUNABLEOP": "maybe"}, BUILDS["2.4.0+rocm6.1"].hip)


def test_importing_the_plugin_pulls_in_no_vendor_sdk() -> None:
    code = (
        "import sys, ezpz_rocm.plugin, ezpz_rocm.probe, ezpz_rocm.policy; "
        "bad = [m for m in ('amdsmi', 'torch') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    env = {"EZPZ_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": "/usr/bin:/bin"}
    env.update({k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME")})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
