"""The roofline floor's byte count (evaluator/timing.py): it must stay a true lower bound, or an
honest kernel faster than the floor would be clamped (and flagged) for the evaluator's mistake."""

from __future__ import annotations

import torch

from evaluator.timing import _bytes_moved


def test_broadcast_inputs_count_their_distinct_bytes_only() -> None:
    base = torch.zeros(4, 2048)
    expanded = base[:, :, None].expand(4, 2048, 2048)  # strides (2048, 1, 0)
    out = torch.zeros(4, 2048, 2048)
    moved = _bytes_moved("div.Scalar", (expanded, 2048), out)
    assert moved == base.numel() * 4 + out.numel() * 4


def test_partial_read_ops_count_outputs_and_indices_not_the_table() -> None:
    table = torch.zeros(50000, 768)
    out = torch.zeros(8, 768)
    assert (
        _bytes_moved("embedding.default", (table, torch.zeros(8, dtype=torch.long)), out)
        == out.numel() * 4
    )
    # nll_loss_backward reads none of `self` (only its shape); it writes all of grad_input
    grad_input = torch.zeros(64, 50000)
    moved = _bytes_moved(
        "nll_loss_backward.default", (torch.zeros(()), grad_input.clone()), grad_input
    )
    assert moved == grad_input.numel() * 4


def test_empty_tensors_move_nothing() -> None:
    assert _bytes_moved("add.Tensor", (torch.zeros(0, 5), torch.zeros(5)), torch.zeros(0, 5)) == 20
