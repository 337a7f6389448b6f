"""Reading launcher variables as integers, and checking a rank layout, with errors that name the variable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ezpz.errors import LaunchEnvError
from ezpz.facts import LaunchEnv

__all__ = ["Found", "build", "first_int", "get", "need_int", "parse_int", "place", "read_int"]

MAX_INT = 2**31 - 1
"""Ranks and sizes are 32-bit in torch.distributed."""

Found = tuple[int, str]
"""An integer and the variable it came from."""


def get(environ: Mapping[str, str], name: str) -> str | None:
    """The stripped value of ``name``; None when unset or blank (``RANK=`` counts as unset)."""
    raw = environ.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


def _fix(name: str) -> str:
    return f"the launcher normally sets {name}; unset it if you exported it by hand, or set it to a whole number"


def parse_int(name: str, raw: str, *, minimum: int = 0) -> int:
    """``raw`` as an int >= ``minimum``; LaunchEnvError naming ``name`` otherwise."""
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    kind = "a non-negative integer" if minimum <= 0 else f"an integer of at least {minimum}"
    if not (digits.isascii() and digits.isdigit()):
        raise LaunchEnvError(name=name, value=raw, expected=kind, fix=_fix(name))
    value = int(text) if len(digits) <= 12 else MAX_INT + 1
    if value < minimum:
        raise LaunchEnvError(name=name, value=raw, expected=kind, fix=_fix(name))
    if value > MAX_INT:
        raise LaunchEnvError(name=name, value=raw, expected=f"{kind} no larger than {MAX_INT}", fix=_fix(name))
    return value


def read_int(environ: Mapping[str, str], name: str, *, minimum: int = 0) -> Found | None:
    """``(value, name)`` when ``name`` is set; None when unset."""
    raw = get(environ, name)
    return None if raw is None else (parse_int(name, raw, minimum=minimum), name)


def need_int(environ: Mapping[str, str], *names: str, minimum: int = 0) -> Found:
    """The first of ``names`` that is set, parsed; for variables the launcher always sets."""
    found = first_int(environ, names, minimum=minimum)
    if found is None:
        raise LaunchEnvError(name=" / ".join(names), value=None, expected="set by the launcher", fix=_fix(names[0]))
    return found


def first_int(environ: Mapping[str, str], names: Iterable[str], *, minimum: int = 0) -> Found | None:
    """The first of ``names`` that is set, parsed; None when none is."""
    for name in names:
        found = read_int(environ, name, minimum=minimum)
        if found is not None:
            return found
    return None


def _var(sources: Mapping[str, str], field: str) -> str:
    """The variable behind ``field``, or a description when it was derived."""
    src = sources.get(field, field)
    return src if src.isidentifier() else f"{field} ({src})"


def _bad(sources: Mapping[str, str], field: str, value: int, expected: str, fix: str) -> LaunchEnvError:
    return LaunchEnvError(name=_var(sources, field), value=value, expected=expected, fix=fix)


_STALE = "the launcher's variables disagree: unset copies exported by hand or left over from another launch"


def check_layout(lay: Mapping[str, int], sources: Mapping[str, str]) -> None:
    """Raise LaunchEnvError, naming the variable, unless ``lay`` is a possible rank layout."""
    rank, world = lay["rank"], lay["world_size"]
    lrank, lworld = lay["local_rank"], lay["local_world_size"]
    node, nodes = lay["node_rank"], lay["num_nodes"]
    if rank >= world:
        raise _bad(sources, "rank", rank, f"below the world size {world} ({_var(sources, 'world_size')})", _STALE)
    if lworld > world:
        raise _bad(sources, "local_world_size", lworld,
                   f"at most the world size {world} ({_var(sources, 'world_size')})", _STALE)
    if lrank >= lworld:
        raise _bad(sources, "local_rank", lrank,
                   f"below the local world size {lworld} ({_var(sources, 'local_world_size')})", _STALE)
    if nodes > world:
        raise _bad(sources, "num_nodes", nodes, f"at most the world size {world} (every node runs a rank)", _STALE)
    if node >= nodes:
        raise _bad(sources, "node_rank", node, f"below the number of nodes {nodes} ({_var(sources, 'num_nodes')})",
                   _STALE)
    if nodes == 1 and lworld != world:
        raise _bad(sources, "local_world_size", lworld,
                   f"equal to the world size {world} ({_var(sources, 'world_size')}) on a single node", _STALE)
    if lworld > world - (nodes - 1):
        raise _bad(sources, "local_world_size", lworld,
                   f"at most {world - (nodes - 1)}: {world} ranks on {nodes} nodes ({_var(sources, 'num_nodes')}, "
                   f"this is node {node}) leave at least one rank for each other node", _STALE)


def build(launcher: str, lay: Mapping[str, int], sources: Mapping[str, str], reason: str) -> LaunchEnv:
    """A checked LaunchEnv (rendezvous unresolved) from a layout and where each value came from."""
    check_layout(lay, sources)
    counts: Mapping[str, Any] = lay  # rank, world_size, ...: LaunchEnv's int fields, by name
    return LaunchEnv(launcher=launcher, sources={"launcher": reason, **sources}, reason=reason, **counts)


BLOCKS = "same number of ranks on every node, placed in blocks"


def place(lay: dict[str, int], sources: dict[str, str], node: Found | None, nodes: Found | None) -> None:
    """Fill ``node_rank``/``num_nodes`` from the given variables, deriving what is missing.

    Derivations assume the launcher's default placement (``BLOCKS``) and say so in ``sources``.
    """
    world, lworld = lay["world_size"], lay["local_world_size"]
    if nodes is not None:
        lay["num_nodes"], sources["num_nodes"] = nodes
    else:
        floor = node[0] + 1 if node is not None else 1
        lay["num_nodes"] = min(world, max(-(-world // max(lworld, 1)), floor))
        floor_note = ", at least node_rank + 1" if node is not None else ""
        sources["num_nodes"] = f"derived: ceil(world_size / local_world_size){floor_note} ({BLOCKS})"
    if node is not None:
        lay["node_rank"], sources["node_rank"] = node
    else:
        lay["node_rank"] = min(lay["rank"] // max(lworld, 1), lay["num_nodes"] - 1)
        sources["node_rank"] = f"derived: rank // local_world_size ({BLOCKS})"
