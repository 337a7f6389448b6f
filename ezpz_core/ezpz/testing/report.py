"""The conformance check's records: one :class:`CheckResult` per check, gathered in a :class:`ConformanceReport`."""

from __future__ import annotations

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["CheckResult", "ConformanceReport"]


@frozen
class CheckResult:
    """One conformance check: its name, whether it passed, and what was seen.

    ``skipped`` results count as passed (the check could not apply).
    """

    name: str
    passed: bool
    detail: str = ""
    skipped: bool = False


@frozen(kw_only=True)
class ConformanceReport:
    """Every check run against one plugin. ``str()`` it for a readable list."""

    plugin: str
    target: str
    results: tuple[CheckResult, ...] = field(converter=as_tuple)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def __getitem__(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(f"no check named {name!r}; checks run: {[r.name for r in self.results]}")

    def names(self) -> list[str]:
        return [r.name for r in self.results]

    def __str__(self) -> str:
        head = f"plugin {self.plugin!r} ({self.target}): " + (
            "conformant" if self.passed else f"{len(self.failures)} of {len(self.results)} checks failed"
        )
        lines = [head]
        for r in self.results:
            mark = "SKIP" if r.skipped else ("PASS" if r.passed else "FAIL")
            lines.append(f"  {mark} {r.name}" + (f": {r.detail}" if r.detail else ""))
        return "\n".join(lines)
