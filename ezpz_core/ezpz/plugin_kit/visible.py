"""Visible-device lists (``CUDA_VISIBLE_DEVICES``, ``HIP_VISIBLE_DEVICES``, ...) read by one documented rule set.

The rules, as CUDA and ``torch.cuda._parse_visible_devices`` apply them (``mixed=True`` adds ROCr's and
HIP's one extension):

1. Unset (None): every device is visible (``restricted`` is False).
2. Set: comma-separated entries, read left to right. The first entry that is not valid ends the list;
   the entries after it are ignored (``stop`` says which entry and why). An empty value shows no device.
3. An ordinal is read like C's ``strtoul`` after surrounding whitespace is trimmed: its leading digits,
   with an optional sign (``"1gpu"`` is 1). No digits, or a negative number, is not valid.
4. A UUID entry starts with one of ``uuid_prefixes`` (``GPU-``, ``MIG-``) and is kept as written.
5. Without ``mixed``, the first entry fixes the kind of the whole list: after a ``GPU-`` entry only
   ``GPU-`` entries are valid (likewise ``MIG-``); after an ordinal only ordinals. With ``mixed``
   (``ROCR_VISIBLE_DEVICES="0,GPU-<uuid>"``), each entry may be either.
6. An entry given twice hides every device (``entries`` is empty and ``stop`` says so).

Which devices the entries then name (an ordinal past the last device, a UUID prefix that matches none) is
the vendor's business: the plugin maps ``entries`` onto what its probe saw.
"""

from __future__ import annotations

from collections.abc import Sequence

from attrs import field

from ezpz.primitives.converters import as_tuple
from ezpz.primitives.frozen_records import frozen

__all__ = ["VisibleList", "parse_visible_devices"]


@frozen
class VisibleList:
    """A parsed visible-devices value: ``entries`` are ordinals (``int``) or UUID strings, in order."""

    raw: str | None
    entries: tuple[int | str, ...] = field(default=(), converter=as_tuple)
    stop: str = ""  # why reading ended early ("" when every entry was read)

    @property
    def restricted(self) -> bool:
        """Whether the variable is set at all (unset: every device visible)."""
        return self.raw is not None

    @property
    def none(self) -> bool:
        """Whether the value hides every device."""
        return self.restricted and not self.entries


def _strtoul(text: str) -> int:
    """Leading digits with an optional sign, as C's ``strtoul`` reads them (``"1gpu"`` -> 1); -1 for none."""
    end = 0
    for i, ch in enumerate(text):
        if ch.isdigit() or (i == 0 and ch in "+-"):
            end = i + 1
        else:
            break
    try:
        return int(text[:end])
    except ValueError:  # no digits, or a lone sign
        return -1


def parse_visible_devices(
    raw: str | None, *, uuid_prefixes: Sequence[str] = ("GPU-", "MIG-"), mixed: bool = False
) -> VisibleList:
    """Parse a visible-devices value by the rules in this module's docstring.

    :param raw: The variable's value, or None when it is unset.
    :param uuid_prefixes: The prefixes that mark a UUID entry.
    :param mixed: Whether ordinals and UUIDs may mix in one list (ROCr, HIP); CUDA's lists are one kind.
    """
    if raw is None:
        return VisibleList(raw=None)
    kinds = " or ".join(f"{p}<uuid>" for p in uuid_prefixes)
    list_prefix: str | None = None  # without `mixed`: the first entry's UUID prefix, or "" for an ordinal list
    entries: list[int | str] = []
    for entry in raw.split(","):
        prefix = next((p for p in uuid_prefixes if entry.startswith(p)), None)
        if not mixed:
            if list_prefix is None:
                list_prefix = prefix or ""
            if (prefix or "") != list_prefix:
                first = f"a {list_prefix}<uuid>" if list_prefix else "an index"
                return VisibleList(raw=raw, entries=entries,
                                   stop=f"entry {entry!r} is not {first} like the first entry, so the list ends there")
        value: int | str = entry if prefix is not None else _strtoul(entry.strip())
        if value in entries:
            return VisibleList(raw=raw, stop=f"entry {entry!r} is repeated, which hides every device")
        if isinstance(value, int) and value < 0:
            return VisibleList(raw=raw, entries=entries,
                               stop=f"entry {entry!r} is not an index or {kinds}, so the list ends there")
        entries.append(value)
    return VisibleList(raw=raw, entries=entries)
