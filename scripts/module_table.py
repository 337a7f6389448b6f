"""The module table of docs/architecture.md, generated from the code (each module's docstring, first line).

    python scripts/module_table.py           # print the table
    python scripts/module_table.py --write   # replace the table between the markers in docs/architecture.md
    python scripts/module_table.py --check   # exit 1 when the doc's table differs from the code

tests/test_architecture_doc.py runs the check, so a module added, moved or
re-described without the doc following fails the tests.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ezpz_core" / "ezpz"
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- module-table:start (scripts/module_table.py --write) -->", "<!-- module-table:end -->"


def summary(path: Path) -> str:
    """The first line of the module's docstring; a module without one is an error (every module says what it does)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        raise SystemExit(f"{path.relative_to(ROOT)} has no module docstring; say in one line what it does")
    return doc.strip().splitlines()[0].replace("|", "\\|")


def rows() -> list[tuple[str, str]]:
    """``(path under ezpz/, summary)``: a package as ``name/`` (its ``__init__``), then its modules, sorted."""
    out: list[tuple[str, str]] = []
    for path in sorted(PACKAGE.rglob("*.py"), key=lambda p: (p.parent.relative_to(PACKAGE).parts, p.name != "__init__.py", p.name)):
        rel = path.relative_to(PACKAGE)
        if rel.name == "__init__.py" and rel.parent == Path("."):
            name = "__init__.py"
        elif rel.name == "__init__.py":
            name = f"{rel.parent.as_posix()}/"
        else:
            name = rel.as_posix()
        if rel.name == "__init__.py" and path.stat().st_size == 0:
            continue
        out.append((name, summary(path)))
    return out


def table() -> str:
    lines = ["| module | what it does |", "|---|---|"]
    lines += [f"| `{name}` | {text} |" for name, text in rows()]
    return "\n".join(lines)


def with_table(doc: str) -> str:
    if START not in doc or END not in doc:
        raise SystemExit(f"{DOC.relative_to(ROOT)} lacks the markers {START!r} and {END!r}")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(with_table(DOC.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if "--check" in argv:
        current = DOC.read_text(encoding="utf-8")
        if with_table(current) != current:
            sys.stderr.write("docs/architecture.md's module table differs from the code: "
                             "run python scripts/module_table.py --write\n")
            return 1
        return 0
    sys.stdout.write(table() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
