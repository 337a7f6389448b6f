"""What comes from outside, parsed and checked before use.

:mod:`~ezpz.inputs.settings` reads every ``EZPZ_*`` variable;
:mod:`~ezpz.inputs.hostlist` reads host lists (Slurm's bracket syntax, hostfiles);
:mod:`~ezpz.inputs.files` reads the files that variables name, bounded and checked.
"""
