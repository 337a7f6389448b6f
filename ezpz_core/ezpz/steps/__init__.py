"""Step supervision: what ``rt.step()`` drives, beside the runtime.

:mod:`~ezpz.steps.clock` counts step boundaries and times the recent steps;
:mod:`~ezpz.steps.straggler_rows` is the exchange's fixed-size rows,
:mod:`~ezpz.steps.straggler_scores` scores ranks against each other (pure),
:mod:`~ezpz.steps.straggler_history` is rank 0's bounded summary,
:mod:`~ezpz.steps.straggler_writer` writes the report off the training thread and
:mod:`~ezpz.steps.straggler_exchange` exchanges the rows and the verdict;
:mod:`~ezpz.steps.hang_budget` learns how long a step may run (pure) and
:mod:`~ezpz.steps.hang_watch` names a step that runs past it;
:mod:`~ezpz.steps.preemption` turns a SIGTERM into a stop at an agreed step.
"""
