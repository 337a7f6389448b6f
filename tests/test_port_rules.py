"""``ezpz port``'s rules, one CUDA pattern at a time: the exact source it writes, the report, and idempotence.

Pure source transformation (libcst, no torch): nothing here runs a script; tests/test_port_scripts.py runs them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import skip_or_fail_in_ci

if importlib.util.find_spec("libcst") is None:
    skip_or_fail_in_ci('libcst is not installed (pip install -e ".[port]")',
                       'CI must install ezpz[port] (libcst) for the ezpz port tests: scripts/test.sh')

from ezpz.porting.project import port_path  # noqa: E402


def port(tmp_path: Path, source: str, name: str = "script.py"):
    """The ported text of ``source`` and its file report."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    ported = port_path(path)
    ((_, (_old, new)),) = ported.texts.items()
    return new, ported.report.files[0], ported.report


def again(tmp_path: Path, text: str) -> str:
    """Port an already ported text: idempotence means it comes back unchanged."""
    new, _, _ = port(tmp_path, text, "again.py")
    return new


CASES = {
    "device strings": (
        """\
        import torch
        device = 'cuda:1'
        x = torch.zeros(3, device='cuda')
        y = x.to('cuda:0', non_blocking=True)
        z = y.cuda(2)
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        device = str(rt.device)
        x = torch.zeros(3, device=rt.device)
        y = x.to(rt.device, non_blocking=True)
        z = y.to(rt.device)
        """),
    "a CUDA-or-CPU choice and a torch.device": (
        """\
        import torch
        dev = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
        other = torch.device('cuda', 0)
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        dev = rt.device
        other = rt.device
        name = str(rt.device)
        """),
    "autocast naming a dtype keeps it through setup(precision=...)": (
        """\
        import torch
        scaler = torch.cuda.amp.GradScaler(init_scale=1024)
        with torch.autocast('cuda', dtype=torch.bfloat16):
            pass
        with torch.amp.autocast(device_type='cuda', dtype=torch.bfloat16):
            pass
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup(precision='bf16')
        scaler = rt.grad_scaler(init_scale=1024)
        with rt.autocast():
            pass
        with rt.autocast():
            pass
        """),
    "two precisions: setup() is left to choose, each autocast keeps its own": (
        """\
        import torch
        with torch.autocast('cuda', dtype=torch.float16):
            pass
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            pass
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        with torch.autocast(rt.device_type, dtype=torch.float16):
            pass
        with torch.autocast(rt.device_type, dtype=torch.bfloat16):
            pass
        """),
    "a dtype the script computes stays, only the device changes": (
        """\
        import torch
        ctx = torch.cuda.amp.autocast(dtype=ptdtype)
        same = torch.autocast(device_type=device_type, dtype=ptdtype)
        scaler = torch.amp.GradScaler(device_type, enabled=False)
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        ctx = torch.autocast(rt.device_type, dtype=ptdtype)
        same = torch.autocast(device_type=device_type, dtype=ptdtype)
        scaler = torch.amp.GradScaler(device_type, enabled=False)
        """),
    "torchrun's variables, set_device, NCCL, DDP device_ids": (
        """\
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        launched = int(os.environ.get('RANK', -1)) != -1
        if launched:
            dist.init_process_group(backend='nccl')
            rank = int(os.environ['RANK'])
            local_rank = int(os.environ.get('LOCAL_RANK', 0))
            world = int(os.getenv('WORLD_SIZE', 1))
            torch.cuda.set_device(local_rank)
            model = DDP(model, device_ids=[local_rank], output_device=local_rank)
        """,
        """\
        import os
        import ezpz
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        launched = int(os.environ.get('RANK', -1)) != -1
        rt = ezpz.hooks.setup()
        if launched:
            if not dist.is_initialized():
                dist.init_process_group(backend=rt.backend)  # setup() started it when the world size is > 1
            rank = rt.rank
            local_rank = rt.local_rank
            world = rt.world_size
            model = DDP(model)
        """),
    "a backend the script names explicitly is asked of setup()": (
        """\
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group('gloo')
        """,
        """\
        import torch.distributed as dist
        if not dist.is_initialized():
            dist.init_process_group('gloo')
        """),
    "timing, memory, ranges, the profiler": (
        """\
        import torch
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
        with torch.cuda.nvtx.range('step'):
            pass
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
            pass
        if torch.cuda.is_available():
            print('accelerated')
        """,
        """\
        import ezpz
        import torch
        from torch.profiler import ProfilerActivity, profile
        rt = ezpz.hooks.setup()
        rt.synchronize()
        peak = rt.memory_stats().get('max_allocated_bytes', float('nan')) / 2**30
        with rt.range('step'):
            pass
        with rt.profiler(record_shapes=True) as prof:
            pass
        if rt.device_type != 'cpu':
            print('accelerated')
        """),
    "TF32 on is setup()'s; off is the script's choice and stays": (
        """\
        import torch
        torch.backends.cuda.matmul.allow_tf32 = True  # faster matmuls
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        """,
        """\
        import torch
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        """),
    "a library module that uses CUDA only inside functions": (
        '''\
        """Helpers."""
        import torch


        def to_gpu(batch):
            """Move a batch."""
            return [t.cuda(non_blocking=True) for t in batch]


        class Saver:
            def save(self, model, path):
                torch.save(model.state_dict(), path)
                return torch.cuda.memory_allocated()
        ''',
        '''\
        """Helpers."""
        import ezpz
        import torch


        def to_gpu(batch):
            """Move a batch."""
            rt = ezpz.hooks.get_runtime() or ezpz.hooks.setup()
            return [t.to(rt.device, non_blocking=True) for t in batch]


        class Saver:
            def save(self, model, path):
                rt = ezpz.hooks.get_runtime() or ezpz.hooks.setup()
                rt.save(model.state_dict(), path)
                return rt.memory_stats().get('allocated_bytes', float('nan'))
        '''),
    "a script that already calls something rt": (
        """\
        import torch
        rt = 'runtime'
        x = torch.ones(2).cuda()
        """,
        """\
        import ezpz
        import torch
        rt = 'runtime'
        ezpz_rt = ezpz.hooks.setup()
        x = torch.ones(2).to(ezpz_rt.device)
        """),
    "a call laid out one argument per line keeps its layout and comments": (
        """\
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
            record_shapes=False,
            with_stack=False,  # keep it small
        ) as prof:
            model = DDP(
                model,
                device_ids=[0],  # one GPU per rank
            )
        """,
        """\
        import ezpz
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        rt = ezpz.hooks.setup()
        with rt.profiler(
            record_shapes=False,
            with_stack=False,  # keep it small
        ) as prof:
            model = DDP(
                model,
            )
        """),
    "a script written for ezpz is left alone (its DDP device_ids included)": (
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        ids = [rt.device.index] if rt.device.index is not None else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        torch.save(model.state_dict(), 'm.pt')
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        ids = [rt.device.index] if rt.device.index is not None else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        torch.save(model.state_dict(), 'm.pt')
        """),
    "a CUDA switch of the script's own is kept, its CUDA branch becomes the device": (
        """\
        import torch
        use_cuda = not args.no_cuda and torch.cuda.is_available()
        device = torch.device('cuda' if use_cuda else 'cpu')
        """,
        """\
        import ezpz
        import torch
        rt = ezpz.hooks.setup()
        use_cuda = not args.no_cuda and rt.device_type != 'cpu'
        device = torch.device(str(rt.device) if use_cuda else 'cpu')
        """),
    "names imported from torch.cuda that only the rewritten lines used are dropped": (
        """\
        import torch
        from torch.cuda.amp import GradScaler, autocast, custom_fwd  # AMP
        from torch.cuda import nvtx
        scaler = GradScaler()
        with autocast():
            pass
        nvtx.range_push('x')
        """,
        """\
        import ezpz
        import torch
        from torch.cuda.amp import custom_fwd  # AMP
        from torch.cuda import nvtx
        rt = ezpz.hooks.setup()
        scaler = rt.grad_scaler()
        with rt.autocast():
            pass
        nvtx.range_push('x')
        """),
    "a file with nothing CUDA is left alone (torch.save included)": (
        """\
        import torch
        torch.save({'a': 1}, 'x.pt')
        state = torch.load('x.pt')
        """,
        """\
        import torch
        torch.save({'a': 1}, 'x.pt')
        state = torch.load('x.pt')
        """),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_rule_writes_this_source_and_porting_again_changes_nothing(tmp_path, name):
    source, expected = CASES[name]
    new, report, _ = port(tmp_path, source)
    assert new == textwrap.dedent(expected), report
    assert again(tmp_path, new) == new


def test_every_change_is_reported_with_its_line_code_and_reason(tmp_path):
    source, _ = CASES["torchrun's variables, set_device, NCCL, DDP device_ids"]
    _, report, whole = port(tmp_path, source)
    rows = {(c.line, c.rule): c for c in report.changes if c.rule != "added"}
    assert rows[(8, "rank")].before == "int(os.environ['RANK'])" and rows[(8, "rank")].after == "rt.rank"
    assert rows[(11, "removed")].before == "torch.cuda.set_device(local_rank)" and rows[(11, "removed")].after == ""
    assert rows[(12, "ddp")].after == "DDP(model)"
    assert rows[(7, "init_process_group")].after.startswith("if not dist.is_initialized():")
    assert all(c.why for c in report.changes)
    assert {c.after for c in report.changes if c.rule == "added"} == {"import ezpz", "rt = ezpz.hooks.setup()"}
    assert not report.unported and not report.unknown
    text = whole.summary()
    assert "torch.cuda.set_device(local_rank)  ->  (removed)" in text and "why: setup() already set" in text
    data = whole.to_dict()
    assert data["counts"]["changes"] == len(report.changes) and data["files"][0]["changes"][0]["why"]


def test_the_precision_and_backend_the_script_names_go_to_setup(tmp_path):
    new, _, whole = port(tmp_path, """\
        import torch
        import torch.distributed as dist
        dist.init_process_group('gloo')
        with torch.autocast('cuda', dtype=torch.float16):
            y = x.cuda()
        """)
    assert "rt = ezpz.hooks.setup(precision='fp16', backend='gloo')" in new
    assert "dist.init_process_group('gloo')  # setup() started it" in new
    assert any("precision='fp16'" in why and "script.py:4" in why for why in whole.setup_why)
    assert any("backend='gloo'" in why and "script.py:3" in why for why in whole.setup_why)


def test_what_cannot_be_ported_and_what_is_unknown_are_listed(tmp_path):
    new, report, whole = port(tmp_path, """\
        import cupy
        import torch
        print(torch.cuda.get_device_name(0))
        s = torch.cuda.Stream()
        torch.cuda.nvtx.range_push('x')
        g = torch.cuda.CUDAGraph()
        torch.cuda.frobnicate()
        if x.is_cuda and name == 'cuda':
            pass
        torch.cuda.manual_seed_all(0)
        """)
    unported = {(f.line, f.api) for f in report.unported}
    assert unported == {(1, "cupy"), (3, "torch.cuda.get_device_name"), (4, "torch.cuda.Stream"),
                        (5, "torch.cuda.nvtx.range_push"), (6, "torch.cuda.CUDAGraph"), (8, ".is_cuda")}
    assert [(f.line, f.api) for f in report.unknown] == [(7, "torch.cuda.frobnicate")]
    assert {(f.line, f.api) for f in report.kept} == {(8, "device_type == 'cuda'"), (10, "torch.cuda.manual_seed_all")}
    assert all(f.why for f in report.unported + report.unknown + report.kept)
    assert whole.needs_hand and "could not port: s = torch.cuda.Stream()" in whole.summary()
    assert new.count("torch.cuda") == 6  # nothing it does not understand is touched


def test_a_directory_agrees_on_one_setup_call_across_its_modules(tmp_path):
    (tmp_path / "proj" / "pkg").mkdir(parents=True)
    (tmp_path / "proj" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "proj" / "pkg" / "amp.py").write_text(
        "import torch\n\ndef ctx():\n    return torch.autocast('cuda', dtype=torch.bfloat16)\n")
    (tmp_path / "proj" / "main.py").write_text("import torch\nfrom pkg.amp import ctx\nx = torch.ones(1).cuda()\n")
    (tmp_path / "proj" / "broken.py").write_text("print 'python 2'\n")
    (tmp_path / "proj" / "latin1.py").write_bytes("# caf\xe9\nx = 'cuda'\n".encode("latin-1"))
    (tmp_path / "proj" / ".venv").mkdir()
    (tmp_path / "proj" / ".venv" / "lib.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    ported = port_path(tmp_path / "proj")
    assert ported.report.setup_call == "ezpz.hooks.setup(precision='bf16')"
    assert "rt = ezpz.hooks.setup(precision='bf16')" in ported.texts["main.py"][1]
    assert "rt = ezpz.hooks.get_runtime() or ezpz.hooks.setup(precision='bf16')" in ported.texts["pkg/amp.py"][1]
    statuses = {f.path: f.status for f in ported.report.files}
    assert statuses == {"main.py": "ported", "pkg/amp.py": "ported", "pkg/__init__.py": "unchanged",
                        "broken.py": "skipped", "latin1.py": "skipped"}
    assert ported.report.needs_hand and "broken.py" not in ported.texts
    from ezpz.porting.project import write_outputs

    write_outputs(ported, tmp_path / "mirror")
    assert (tmp_path / "mirror" / "broken.py").read_text() == "print 'python 2'\n"  # copied as it was
    assert (tmp_path / "mirror" / "latin1.py").read_bytes() == (tmp_path / "proj" / "latin1.py").read_bytes()
    assert not (tmp_path / "mirror" / ".venv").exists()
    assert "ezpz.hooks.setup(precision='bf16')" in (tmp_path / "mirror" / "main.py").read_text()


def test_the_porter_needs_no_torch(tmp_path):
    """Pure source transformation: porting imports neither torch nor the plugin host's setup path."""
    script = tmp_path / "s.py"
    script.write_text("import torch\nx = torch.ones(1).cuda()\n")
    code = ("import sys\nfrom pathlib import Path\nfrom ezpz.porting.project import port_path\n"
            f"port_path(Path({str(script)!r}))\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "assert 'ezpz.runtime' not in sys.modules and 'ezpz.startup' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
