"""Failure records: what a rank that ended abnormally leaves behind for ``ezpz launch`` and the user.

:mod:`ezpz.failures.record` is the file format (one JSON file per rank);
:mod:`ezpz.failures.classify` turns an exception or a signal into a kind;
:mod:`ezpz.failures.capture` installs the hooks that write a record when a
rank that went through ``ezpz.hooks.setup()`` ends abnormally.
"""
