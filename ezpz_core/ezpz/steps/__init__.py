"""Step supervision: what ``rt.step()`` drives, beside the runtime.

:mod:`~ezpz.steps.clock` counts step boundaries and times the recent steps;
:mod:`~ezpz.steps.straggler_scores` scores ranks against each other (pure) and
:mod:`~ezpz.steps.straggler_exchange` exchanges the times and writes the report;
:mod:`~ezpz.steps.hang_budget` learns how long a step may run (pure) and
:mod:`~ezpz.steps.hang_watch` names a step that runs past it;
:mod:`~ezpz.steps.preemption` turns a SIGTERM into a stop at an agreed step.
"""
