"""Environment staging (``ezpz stage``, ``launch --stage-env``): pack once, fan out to node-local storage, run there.

Pure parts: :mod:`~ezpz.staging.fanout` (who copies to whom, in which round),
:mod:`~ezpz.staging.verdict` (go on without failed nodes, or stop),
:mod:`~ezpz.staging.fingerprint` (reuse the tarball or pack again) and the
path rewrite in :mod:`~ezpz.staging.node_agent`. Impure, thin: :mod:`~ezpz.staging.pack`
(``tar``), :mod:`~ezpz.staging.node_agent` (runs on every node: receives, unpacks,
serves peers), :mod:`~ezpz.staging.coordinator` (the launch node's side) and
:mod:`~ezpz.staging.stage` (the whole step). See docs/staging.md.
"""
