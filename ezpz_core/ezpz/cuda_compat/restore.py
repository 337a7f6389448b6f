"""What a run of the mode changes in the process, saved at its start and put back at its end.

``sys.argv`` (the script's), ``sys.path`` (its directory first), ``os.environ`` (the torchrun variables the mode
sets, and whatever the script sets), ``sys.modules['__main__']`` and the mode's in-process plugin: after
:meth:`Saved.restore` a second run in the same process starts from the same state as the first.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

__all__ = ["Saved"]


class Saved:
    """The process state at the start of a run, put back by :meth:`restore`."""

    def __init__(self) -> None:
        self.argv = list(sys.argv)
        self.path = list(sys.path)
        self.environ = dict(os.environ)
        self.main: ModuleType | None = sys.modules.get("__main__")

    def restore(self) -> None:
        """Put ``sys.argv``, ``sys.path``, ``os.environ`` and ``__main__`` back as they were (the same list objects)."""
        sys.argv[:] = self.argv
        sys.path[:] = self.path
        for name in [k for k in os.environ if k not in self.environ]:
            del os.environ[name]
        for name, value in self.environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        if self.main is not None:
            sys.modules["__main__"] = self.main
