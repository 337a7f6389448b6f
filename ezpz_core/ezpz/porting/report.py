"""What ``ezpz port`` did to each file: every change, every line it could not port, every CUDA API it does not know.

Plain records (no libcst): :class:`FileReport` per file, :class:`PortReport` for
the run, written as JSON (:meth:`PortReport.to_json`) and as a summary a person
reads (:meth:`PortReport.summary`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import attrs

__all__ = ["Change", "FileReport", "Finding", "PortReport", "REPORT_VERSION"]

REPORT_VERSION = 1


@attrs.frozen
class Change:
    """One rewrite: where, the code before and after (``after`` empty: removed), the catalogue rule and why."""

    line: int
    before: str
    after: str
    rule: str
    why: str


@attrs.frozen
class Finding:
    """A line left as it was: ``api`` is what was found, ``why`` what it means and what to do by hand."""

    line: int
    api: str
    source: str
    why: str


@attrs.define
class FileReport:
    """One file's outcome. ``status``: ported, unchanged, or skipped (``skipped`` says why)."""

    path: str
    status: str = "unchanged"
    changes: list[Change] = attrs.field(factory=list)
    unported: list[Finding] = attrs.field(factory=list)
    """CUDA uses the porter recognised but could not rewrite: they need a hand."""
    unknown: list[Finding] = attrs.field(factory=list)
    """CUDA APIs the catalogue does not know at all."""
    kept: list[Finding] = attrs.field(factory=list)
    """CUDA-flavoured lines left on purpose (harmless elsewhere, or the script's explicit choice)."""
    skipped: str = ""

    @property
    def needs_hand(self) -> bool:
        return bool(self.unported or self.unknown or self.skipped)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _sorted(items: Iterable[Any]) -> list[Any]:
    return sorted(items, key=lambda i: i.line)


@attrs.define
class PortReport:
    """The whole run: the ``setup()`` arguments every ported file uses, and one :class:`FileReport` per file."""

    source: str
    setup_call: str = "ezpz.hooks.setup()"
    setup_why: list[str] = attrs.field(factory=list)
    files: list[FileReport] = attrs.field(factory=list)

    @property
    def needs_hand(self) -> bool:
        return any(f.needs_hand for f in self.files)

    def counts(self) -> dict[str, int]:
        return {"files": len(self.files), "files_changed": sum(f.status == "ported" for f in self.files),
                "changes": sum(len(f.changes) for f in self.files),
                "unported": sum(len(f.unported) for f in self.files),
                "unknown": sum(len(f.unknown) for f in self.files),
                "kept": sum(len(f.kept) for f in self.files),
                "skipped": sum(bool(f.skipped) for f in self.files)}

    def to_dict(self) -> dict[str, Any]:
        files = []
        for f in self.files:
            row = f.to_dict()
            for key in ("changes", "unported", "unknown", "kept"):
                row[key] = [attrs.asdict(i) for i in _sorted(getattr(f, key))]
            files.append(row)
        return {"version": REPORT_VERSION, "source": self.source, "setup_call": self.setup_call,
                "setup_why": list(self.setup_why), "counts": self.counts(), "files": files}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def summary(self) -> str:
        """The report as text: a count line, then per file its changes, what needs a hand, and what was kept."""
        c = self.counts()
        lines = [f"ezpz port {self.source}: {c['changes']} changes in {c['files_changed']} of {c['files']} files; "
                 f"{c['unported']} lines could not be ported, {c['unknown']} unknown CUDA APIs, "
                 f"{c['kept']} kept on purpose, {c['skipped']} files skipped",
                 f"  setup call: rt = {self.setup_call}"]
        lines += [f"    {why}" for why in self.setup_why]
        for f in self.files:
            if f.status == "unchanged" and not f.needs_hand and not f.kept:
                continue
            lines.append(f"{f.path}: {f.status}" + (f" ({f.skipped})" if f.skipped else ""))
            for ch in sorted(f.changes, key=lambda c: (c.rule != "added", c.line)):
                after = ch.after if ch.after else "(removed)"
                where = f"+{ch.line}" if ch.rule == "added" else str(ch.line)  # an added line: its place in the output
                lines.append(f"  {where:>5}  {_one_line(ch.before)}  ->  {_one_line(after)}")
                lines.append(f"         why: {ch.why}")
            for title, items in (("could not port", f.unported), ("unknown CUDA API", f.unknown),
                                 ("kept", f.kept)):
                for item in _sorted(items):
                    lines.append(f"  {item.line:>5}  {title}: {_one_line(item.source)}")
                    lines.append(f"         {item.why}")
        return "\n".join(lines) + "\n"


def _one_line(code: str, width: int = 100) -> str:
    flat = " ".join(code.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
