"""The fused RNN cells torch sends every non-CPU device to, as kernels for ``emu``.

``nn.LSTM``, ``nn.GRU``, ``nn.LSTMCell`` and ``nn.GRUCell`` on a CUDA, XPU or
PrivateUse1 tensor call ``aten::_thnn_fused_lstm_cell`` and
``aten::_thnn_fused_gru_cell`` (aten/src/ATen/native/RNN.cpp, torch 2.13), and
their backward passes ``_thnn_fused_lstm_cell_backward_impl`` and
``_thnn_fused_gru_cell_backward``. Only CUDA has kernels for them, so the
device's fallback (which runs the CPU's kernel) cannot serve them. These are
the math of CUDA's kernels (aten/src/ATen/native/cuda/RNN.cu), written with
the CPU's operators on CPU aliases of the device tensors, the gates summed in
the order the CPU's own cell sums them. The workspace a forward pass hands its
backward pass holds the activated gates (LSTM: input, forget, cell, output;
GRU: reset, input, new gate, ``hx`` and the hidden new-gate part), as CUDA's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["register_rnn_cells"]


def _plus(t: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return t if bias is None else t + bias


class _Cells:
    """The four kernels, over the device's aliasing: ``alias`` (a device tensor's CPU alias) and ``hand`` (a CPU
    tensor handed to the device at an index)."""

    def __init__(self, alias: Callable[[torch.Tensor], torch.Tensor],
                 hand: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
        self.alias, self.hand = alias, hand

    def down(self, t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else self.alias(t)

    def up(self, t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
        return None if t is None else self.hand(t.contiguous(), like.device.index or 0)

    def lstm_cell(self, input_gates: torch.Tensor, hidden_gates: torch.Tensor, cx: torch.Tensor,
                  input_bias: torch.Tensor | None = None,
                  hidden_bias: torch.Tensor | None = None) -> tuple[Any, Any, Any]:
        ig, hg, c = self.alias(input_gates), self.alias(hidden_gates), self.alias(cx)
        # as the CPU's LSTMCell: the hidden part, then the input part
        gates = _plus(hg, self.down(hidden_bias)) + _plus(ig, self.down(input_bias))
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
        cy = f * c + i * g
        hy = o * cy.tanh()
        return self.up(hy, cx), self.up(cy, cx), self.up(torch.cat([i, f, g, o], 1), cx)

    def lstm_cell_backward(self, grad_hy: torch.Tensor | None, grad_cy: torch.Tensor | None, cx: torch.Tensor,
                           cy: torch.Tensor, workspace: torch.Tensor, has_bias: bool) -> tuple[Any, Any, Any]:
        c, y = self.alias(cx), self.alias(cy)
        i, f, g, o = self.alias(workspace).chunk(4, 1)
        go = torch.zeros_like(y) if grad_hy is None else self.alias(grad_hy)
        gc = torch.zeros_like(y) if grad_cy is None else self.alias(grad_cy)
        tanh_cy = y.tanh()
        grad_c = go * o * (1 - tanh_cy * tanh_cy) + gc
        grad_gates = torch.cat([grad_c * g * (1 - i) * i, grad_c * c * (1 - f) * f, grad_c * i * (1 - g * g),
                                go * tanh_cy * (1 - o) * o], 1)
        grad_bias = grad_gates.sum(0) if has_bias else None
        return self.up(grad_gates, cx), self.up(grad_c * f, cx), self.up(grad_bias, cx)

    def gru_cell(self, input_gates: torch.Tensor, hidden_gates: torch.Tensor, hx: torch.Tensor,
                 input_bias: torch.Tensor | None = None, hidden_bias: torch.Tensor | None = None) -> tuple[Any, Any]:
        h = self.alias(hx)
        ir, ii, in_ = _plus(self.alias(input_gates), self.down(input_bias)).chunk(3, 1)
        hr, hi, hn = _plus(self.alias(hidden_gates), self.down(hidden_bias)).chunk(3, 1)
        reset = (hr + ir).sigmoid()
        update = (hi + ii).sigmoid()
        new = (in_ + hn * reset).tanh()
        hy = (h - new) * update + new  # as the CPU's GRUCell
        return self.up(hy, hx), self.up(torch.cat([reset, update, new, h, hn], 1), hx)

    def gru_cell_backward(self, grad_hy: torch.Tensor, workspace: torch.Tensor,
                          has_bias: bool) -> tuple[Any, Any, Any, Any, Any]:
        reset, update, new, h, hn = self.alias(workspace).chunk(5, 1)
        go = self.alias(grad_hy)
        grad_update = go * (h - new) * (1 - update) * update
        grad_new = go * (1 - update) * (1 - new * new)
        grad_reset = grad_new * hn * (1 - reset) * reset
        grad_input = torch.cat([grad_reset, grad_update, grad_new], 1)
        grad_hidden = torch.cat([grad_reset, grad_update, grad_new * reset], 1)
        bias_in, bias_hidden = (grad_input.sum(0), grad_hidden.sum(0)) if has_bias else (None, None)
        return (self.up(grad_input, grad_hy), self.up(grad_hidden, grad_hy), self.up(go * update, grad_hy),
                self.up(bias_in, grad_hy), self.up(bias_hidden, grad_hy))


def register_rnn_cells(impl: Any, key: str, alias: Callable[[torch.Tensor], torch.Tensor],
                       hand: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
    """Register the four kernels on ``impl`` (a ``torch.library.Library("aten", "IMPL")``) for dispatch key
    ``key``; ``alias`` and ``hand`` move tensors between the device and the CPU without a copy (the device
    module's ``to_cpu_alias`` and its ``to_<device>``)."""
    cells = _Cells(alias, hand)
    impl.impl("_thnn_fused_lstm_cell", cells.lstm_cell, key)
    impl.impl("_thnn_fused_lstm_cell_backward_impl", cells.lstm_cell_backward, key)
    impl.impl("_thnn_fused_gru_cell", cells.gru_cell, key)
    impl.impl("_thnn_fused_gru_cell_backward", cells.gru_cell_backward, key)
