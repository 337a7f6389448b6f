"""What torch's own test databases found on emu, in this process: the fused RNN cells (and their backward passes),
conjugate and negative views (fft.hfft killed the process), numbers where a tensor goes, sparse results refused by
name, and DataLoader(pin_memory=True) while emu is torch's accelerator. The databases themselves, in worker
processes: test_emu_torch_db.py."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from ezpz_example_emu import device as emu


@pytest.fixture(scope="module", autouse=True)
def registered():
    return emu.register()


def _grads(module: torch.nn.Module, x: torch.Tensor, device: str) -> tuple[torch.Tensor, list[torch.Tensor]]:
    module = module.to(device)
    x = x.detach().clone().to(device).requires_grad_()
    out = module(x)
    out = out[0] if isinstance(out, tuple) else out
    out.sum().backward()
    return out.detach().cpu(), [p.grad.cpu() for p in [x, *module.parameters()]]


@pytest.mark.parametrize("make", [lambda: torch.nn.LSTM(3, 4, num_layers=2), lambda: torch.nn.GRU(3, 4, bias=False),
                                  lambda: torch.nn.LSTMCell(3, 4), lambda: torch.nn.GRUCell(3, 4)],
                         ids=["LSTM", "GRU-no-bias", "LSTMCell", "GRUCell"])
def test_the_fused_rnn_cells_give_the_cpus_outputs_and_gradients(make) -> None:
    torch.manual_seed(0)
    cpu = make()
    dev = copy.deepcopy(cpu)
    x = torch.randn(5, 2, 3) if isinstance(cpu, torch.nn.RNNBase) else torch.randn(2, 3)
    want, want_grads = _grads(cpu, x, "cpu")
    got, got_grads = _grads(dev, x, "emu")
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w)


def test_conjugate_and_negative_views_copy_and_fft_hfft_runs() -> None:
    c = torch.randn(4, 5, dtype=torch.complex64)
    e = c.to("emu")
    assert torch.equal(e.conj().resolve_conj().cpu(), c.conj().resolve_conj())
    assert torch.equal(e.conj().cpu(), c.conj()) and torch.equal(torch._neg_view(e).cpu(), -c)
    assert torch.equal(torch.fft.hfft(e).cpu(), torch.fft.hfft(c))
    alias = emu.to_cpu_alias(e.conj())
    assert alias.is_conj() and alias.data_ptr() == e.data_ptr()  # the same memory, the flag set on the CPU side


def test_a_number_where_a_tensor_goes_takes_the_scalar_overload() -> None:
    x = torch.arange(10)
    assert torch.equal(torch.remainder(x.to("emu"), 3).cpu(), torch.remainder(x, 3))
    i = torch.tensor([[0], [1], [2]])
    v = torch.randn(3, 5)
    assert torch.equal(torch.take_along_dim(v.to("emu"), i.to("emu"), 1).cpu(), torch.take_along_dim(v, i, 1))
    assert (torch.arange(3).to("emu") * 2.5).dtype == torch.float32  # a wrapped number's promotion


def test_a_sparse_result_is_refused_by_name() -> None:
    with pytest.raises(NotImplementedError, match="emu holds strided tensors only: a torch.sparse_coo result"):
        torch.eye(3).to("emu").to_sparse()


@pytest.mark.parametrize("workers", [0, 1])
def test_a_pinning_data_loader_neither_fails_nor_pins(workers: int) -> None:
    assert torch.accelerator.current_accelerator() == torch.device("emu")
    data = TensorDataset(torch.randn(8, 3), torch.arange(8))
    batches = list(DataLoader(data, batch_size=4, pin_memory=True, num_workers=workers))
    assert len(batches) == 2 and all(not x.is_pinned() and x.device.type == "cpu" for x, _ in batches)
    assert torch.equal(torch.cat([x for x, _ in batches]), data.tensors[0])
