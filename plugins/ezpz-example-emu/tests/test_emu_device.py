"""The emu device itself, in this process: memory, kernels, autograd, autocast, GradScaler, checkpoints, compile, and
what FSDP2 and DCP ask of it (storage resize, non-blocking copies to the CPU, streams and events)."""

from __future__ import annotations

import io

import pytest
import torch

from ezpz_example_emu import device as emu


@pytest.fixture(scope="module", autouse=True)
def registered():
    return emu.register()


def test_register_is_idempotent_and_makes_a_torch_device():
    module = emu.register()
    assert module is emu.register() is torch.get_device_module("emu") and emu.is_registered()
    assert torch._C._get_privateuse1_backend_name() == "emu"
    assert module.is_available() and module.device_count() == 1 and module.current_device() == 0
    assert torch.device("emu").type == "emu" and torch.tensor([1.0]).emu().is_emu


def test_memory_is_handed_over_not_copied():
    cpu = torch.arange(6.0)
    dev = emu.to_emu(cpu, 0)
    assert dev.device == torch.device("emu:0") and dev.data_ptr() == cpu.data_ptr()
    emu.to_cpu_alias(dev).mul_(2)
    assert torch.equal(cpu, torch.arange(6.0) * 2)  # one memory, two devices' views of it


def test_copies_between_cpu_and_emu_and_arithmetic():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = x.to("emu")
    assert y.device.type == "emu" and y.data_ptr() != x.data_ptr()  # .to() copies, as on any device
    assert torch.equal((y @ y.t()).cpu(), x @ x.t())
    assert torch.equal(y.sum(dim=0).cpu(), x.sum(dim=0)) and y.max().item() == 11.0
    assert torch.equal(torch.zeros(2, 3, device="emu").cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.full((2,), 7.0, device="emu").cpu(), torch.full((2,), 7.0))


def test_views_share_memory_and_in_place_ops_stick():
    y = torch.zeros(4, 4, device="emu")
    y[1:3, :2].fill_(5)  # slice -> as_strided (a view), then an in-place kernel
    y.t()[0].add_(1)  # a transposed view's row is the original's column
    want = torch.zeros(4, 4)
    want[1:3, :2] = 5
    want.t()[0].add_(1)
    assert torch.equal(y.cpu(), want)
    assert y.t().stride() == (1, 4) and y[1:].storage_offset() == 4


def test_out_arguments_are_resized_and_written():
    out = torch.empty(0, device="emu")
    torch.add(torch.ones(3, device="emu"), 1, out=out)
    assert out.shape == (3,) and torch.equal(out.cpu(), torch.full((3,), 2.0))
    big = torch.zeros(2, 3, device="emu")
    torch.mul(torch.ones(3, device="emu"), 4, out=big[1])  # an out= that is a view is written in place
    assert torch.equal(big.cpu(), torch.tensor([[0.0, 0, 0], [4, 4, 4]]))


def test_training_step_equals_the_cpu_bitwise():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    dev.load_state_dict(ref.state_dict())
    dev.to("emu")
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2) for m in (ref, dev)]
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        x, y = torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)
        for model, opt, where in ((ref, opts[0], "cpu"), (dev, opts[1], "emu")):
            loss = torch.nn.functional.mse_loss(model(x.to(where)), y.to(where))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for a, b in zip(ref.parameters(), dev.parameters()):
        assert b.device.type == "emu" and torch.equal(a.detach(), b.detach().cpu())


def test_convolutions_forward_and_backward_equal_the_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Conv2d(3, 4, 3, padding=1)
    dev = torch.nn.Conv2d(3, 4, 3, padding=1)
    dev.load_state_dict(ref.state_dict())
    dev.to("emu")
    x = torch.randn(2, 3, 8, 8)
    a, b = ref(x), dev(x.to("emu"))
    a.square().sum().backward()
    b.square().sum().backward()
    assert torch.equal(a.detach(), b.detach().cpu())
    for p, q in zip(ref.parameters(), dev.parameters()):
        assert q.grad.device.type == "emu" and torch.equal(p.grad, q.grad.cpu())


@pytest.mark.parametrize("mask", ["causal", "float", "bool"])
def test_attention_takes_the_kernel_the_cpu_takes(mask):
    """The CPU's fused attention (forward and backward), not torch's math path for devices without one."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 8, 16, requires_grad=True) for _ in range(3))
    qe, ke, ve = (t.detach().to("emu").requires_grad_() for t in (q, k, v))
    attn = {"causal": None, "float": torch.randn(8, 8), "bool": torch.rand(8, 8) > 0.3}[mask]
    kwargs = {"is_causal": mask == "causal"}
    a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn, **kwargs)
    b = torch.nn.functional.scaled_dot_product_attention(qe, ke, ve, attn_mask=None if attn is None else attn.to("emu"),
                                                         **kwargs)
    grad = torch.randn_like(a)
    a.backward(grad)
    b.backward(grad.to("emu"))
    assert torch.equal(a.detach(), b.detach().cpu())
    assert all(torch.equal(x.grad, y.grad.cpu()) for x, y in ((q, qe), (k, ke), (v, ve)))


def test_layer_and_group_norm_take_the_cpu_kernels_not_torchs_decomposition():
    torch.manual_seed(0)
    x = torch.randn(4, 8, 16)
    assert torch.equal(torch.nn.functional.layer_norm(x, [16]),
                       torch.nn.functional.layer_norm(x.to("emu"), [16]).cpu())
    assert torch.equal(torch.nn.functional.group_norm(x, 2), torch.nn.functional.group_norm(x.to("emu"), 2).cpu())


def test_autocast_really_casts_to_the_requested_dtype():
    assert torch.amp.is_autocast_available("emu")
    lin = torch.nn.Linear(4, 4).to("emu")
    x = torch.randn(2, 4, device="emu")
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("emu", dtype=dtype):
            assert torch.is_autocast_enabled("emu")
            out = lin(x)
            kept = torch.softmax(out, dim=-1)  # an fp32 op under autocast
        assert out.dtype == dtype and kept.dtype == torch.float32
    assert lin(x).dtype == torch.float32  # outside the block, nothing is cast


def test_grad_scaler_unscales_and_skips_inf_steps():
    lin = torch.nn.Linear(4, 1).to("emu")
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("emu", init_scale=2.0**10)
    x = torch.randn(3, 4, device="emu")
    scaler.scale(lin(x).sum()).backward()
    before = lin.weight.detach().cpu().clone()
    scaler.step(opt)
    scaler.update()
    assert not torch.equal(before, lin.weight.detach().cpu()) and scaler.get_scale() == 2.0**10
    opt.zero_grad()
    scaler.scale(lin(x).sum()).backward()
    lin.weight.grad.view(-1)[0] = float("inf")
    before = lin.weight.detach().cpu().clone()
    scaler.step(opt)
    scaler.update()
    assert torch.equal(before, lin.weight.detach().cpu()) and scaler.get_scale() == 2.0**9


def test_checkpoints_save_from_and_load_onto_emu():
    model = torch.nn.Linear(3, 2).to("emu")
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    for where in (None, "emu", "cpu", torch.device("emu:0")):
        buf.seek(0)
        state = torch.load(buf, map_location=where, weights_only=True)
        assert state["weight"].device.type == ("cpu" if where == "cpu" else "emu")
        assert torch.equal(state["weight"].cpu(), model.weight.detach().cpu())
    cpu_saved = io.BytesIO()
    plain = torch.nn.Linear(3, 2)
    torch.save(plain.state_dict(), cpu_saved)
    cpu_saved.seek(0)
    onto = torch.load(cpu_saved, map_location="emu", weights_only=True)
    assert onto["bias"].device.type == "emu" and torch.equal(onto["bias"].cpu(), plain.bias.detach())


def test_device_module_answers_what_torch_asks():
    module = torch.get_device_module("emu")
    module.synchronize()
    with module.device(0):
        assert module.current_device() == 0
    with pytest.raises(RuntimeError, match="emu:3 does not exist"):
        module.set_device(3)
    before = module.memory_stats()["allocated_bytes_total"]
    torch.empty(256, device="emu")
    after = module.memory_stats()
    assert after["allocated_bytes_total"] >= before + 1024 and after["allocations_total"] > 0
    assert module.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]


def test_compile_with_aot_eager_and_inductor_refuses():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("emu")
    x = torch.randn(3, 4, device="emu")
    want = model(x).detach().cpu()
    compiled = torch.compile(model, backend="aot_eager")
    out = compiled(x)
    out.sum().backward()
    assert torch.allclose(out.detach().cpu(), want) and model[0].weight.grad.device.type == "emu"
    torch._dynamo.reset()
    with pytest.raises(Exception, match="emu"):  # Inductor has no code generator for emu (the plugin says so)
        torch.compile(model, backend="inductor")(x)
    torch._dynamo.reset()


def test_the_profiler_sees_emu_work_on_the_cpu_activity():
    x = torch.randn(8, 8, device="emu")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.profiler.record_function("emu-range"):
            (x @ x).sum().item()
    names = {e.key for e in prof.key_averages()}
    assert "emu-range" in names and "aten::mm" in names


def test_a_storage_resizes_in_place_as_fsdp2_frees_and_refills_its_parameters():
    t = torch.arange(4.0, device="emu")
    storage = t.untyped_storage()
    storage.resize_(0)  # FSDP2's free_storage
    assert storage.nbytes() == 0 and t.untyped_storage().nbytes() == 0 and t.shape == (4,)
    storage.resize_(16)  # FSDP2's alloc_storage: the same storage object, every tensor on it, fresh memory
    t.copy_(torch.arange(10.0, 14.0))
    assert torch.equal(t.cpu(), torch.arange(10.0, 14.0)) and t.device.type == "emu"
    storage.resize_(8)  # shrinking keeps the first bytes
    assert storage.nbytes() == 8 and torch.equal(t[:2].cpu(), torch.tensor([10.0, 11.0]))
    cpu = torch.arange(3.0).untyped_storage()
    cpu.resize_(16)  # other devices' storages: torch's own resize
    assert cpu.nbytes() == 16


def test_a_non_blocking_copy_to_the_cpu_needs_no_pinned_memory():
    x = torch.arange(6.0).reshape(2, 3)
    y = x.to("emu").t()  # a strided view
    got = y.to("cpu", non_blocking=True)  # as torch.distributed.checkpoint copies shards
    assert got.device.type == "cpu" and torch.equal(got, x.t()) and got.stride() == x.t().stride()
    half = y.to(torch.float16)
    assert half.device.type == "emu" and half.dtype == torch.float16 and torch.equal(half.cpu(), x.t().half())


def test_streams_and_events_are_torchs_types_on_the_device():
    module = torch.get_device_module("emu")
    stream, event = module.Stream(priority=-1), module.Event()
    assert isinstance(stream, torch.Stream) and isinstance(event, torch.Event) and stream.device.type == "emu"
    with module.stream(stream):
        event.record()
    torch.accelerator.current_stream().wait_event(event)  # FSDP2 mixes them so
    module.current_stream().wait_stream(stream)
    event.synchronize()
    assert event.query()
