"""``python -m ezpz``: the ``ezpz`` command."""

from ezpz.cli import main

raise SystemExit(main())
