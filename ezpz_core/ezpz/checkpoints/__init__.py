"""Sharded checkpoints: ``Runtime.save_checkpoint`` / ``load_checkpoint`` and finding the latest complete one.

:mod:`.layout` is the directory format and needs no torch (a launcher reads it to resume);
:mod:`.sharded` writes and reads one through ``torch.distributed.checkpoint``; :mod:`.refusal` is
``Runtime.save``'s check for sharded tensors.
"""

from __future__ import annotations

from ezpz.checkpoints.layout import checkpoint_name, is_complete, latest_checkpoint

__all__ = ["checkpoint_name", "is_complete", "latest_checkpoint"]
