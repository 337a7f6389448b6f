"""Pure policies: facts in, explained decisions out. No torch, no environment.

Plugins call :func:`choose_backend` and :func:`choose_precision` with their
vendor-ordered options so that overrides behave the same for every vendor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ezpz.decisions import (
    SUPPORTED, UNSUPPORTED, AmpPolicy, BackendChoice, BackendOption, DeviceChoice, PrecisionOption,
)
from ezpz.errors import UnavailableError
from ezpz.facts import Alternative, DeviceCandidate, Rejection

__all__ = [
    "choose_backend", "choose_device", "choose_precision", "parse_device_request", "rank_candidates",
    "refuse_unknown_device_types",
]


def rank_candidates(candidates: Sequence[DeviceCandidate]) -> list[DeviceCandidate]:
    """Highest priority first; ties broken by plugin name then device type (stable, data-driven)."""
    return sorted(candidates, key=lambda c: (-c.priority, c.plugin, c.device_type))


def parse_device_request(value: str, *, name: str) -> tuple[str, int | None]:
    """``"cuda:1"`` -> ``("cuda", 1)``; ``"xpu"`` -> ``("xpu", None)``."""
    from ezpz.errors import ConfigError

    text = value.strip().lower()
    kind, sep, index = text.partition(":")
    if not kind or (sep and not (index.isascii() and index.isdigit() and len(index) <= 9)):
        raise ConfigError(
            name=name,
            value=value,
            expected="a device type optionally followed by ':<index>' (for example 'cuda', 'xpu:1', 'cpu')",
            fix=f"set {name} to one of the device types `ezpz doctor` lists, or unset it",
        )
    return kind, (int(index) if sep else None)


def refuse_unknown_device_types(
    candidates: Sequence[DeviceCandidate], unknown: Mapping[str, str]
) -> tuple[list[DeviceCandidate], list[Rejection]]:
    """Candidates torch can make, and a rejection for each one whose device type torch does not know.

    ``unknown`` maps a device type to torch's refusal (:func:`ezpz.probes.torch_types.unknown_device_types`).
    The usual cause is the vendor's torch extension (``torch_npu``, a PrivateUse1 backend) not installed, not
    imported by the plugin, or broken; the reason names the plugin, the device type and that fix.
    """
    kept: list[DeviceCandidate] = []
    refused: list[Rejection] = []
    for cand in candidates:
        message = unknown.get(cand.device_type)
        if message is None:
            kept.append(cand)
            continue
        plugin = cand.plugin or "?"
        refused.append(Rejection(
            device_type=cand.device_type, vendor=cand.vendor, plugin=cand.plugin,
            reason=(f"plugin {plugin!r} offered device type {cand.device_type!r}, which this torch does not know "
                    f"({message}); install the vendor's torch extension that registers {cand.device_type!r} and "
                    f"have the plugin import it in its probe (or set EZPZ_DISABLE_PLUGINS={plugin})"),
            problem=True,
        ))
    return kept, refused


def _matches(candidate: DeviceCandidate, kind: str) -> bool:
    return kind in (candidate.device_type, candidate.vendor, candidate.plugin)


def choose_device(
    candidates: Sequence[DeviceCandidate],
    rejections: Sequence[Rejection],
    *,
    local_rank: int,
    local_world_size: int,
    requested: str | None = None,
    requested_from: str = "EZPZ_DEVICE",
    not_loaded: Mapping[str, str] | None = None,
) -> DeviceChoice:
    """Pick this rank's device.

    Without a request, the highest-priority candidate wins. A request names a
    device type, vendor or plugin (``"cuda"``, ``"amd"``, ``"rocm"``), with an
    optional index. A request nothing offers is an error that lists what is on
    offer and what was rejected. Non-shared devices get index ``local_rank``,
    which must be below the visible device count. ``not_loaded`` maps installed
    plugins the user's controls kept out (``EZPZ_DISABLE_PLUGINS``, ``EZPZ_PLUGINS``)
    to why and how to let them in: a request naming one says that, not "install it".
    """
    ranked = rank_candidates(candidates)
    rejected = [Alternative(name=r.device_type, reason=f"{r.vendor}: {r.reason}", plugin=r.plugin, problem=r.problem)
                for r in rejections]
    index: int | None = None
    if requested:
        kind, index = parse_device_request(requested, name=requested_from)
        matching = [c for c in ranked if _matches(c, kind)]
        if not matching:
            offered = ", ".join(f"{c.device_type} ({c.plugin})" for c in ranked) or "nothing"
            why_not = "; ".join(f"{r.name}: {r.reason}" for r in rejected if r.name == kind or kind in r.reason)
            kept_out = (not_loaded or {}).get(kind)
            if kept_out is not None and not why_not:
                raise UnavailableError(
                    name=requested_from, value=requested,
                    expected=f"a device the loaded plugins offer here: {offered} (plugin {kind!r} is installed but "
                             f"not loaded: {kept_out})",
                    fix=f"let plugin {kind!r} load ({kept_out}), pick one of the offered devices, or unset "
                        f"{requested_from}",
                )
            raise UnavailableError(
                name=requested_from,
                value=requested,
                expected=f"a device the installed plugins offer here: {offered}"
                + (f" (rejected: {why_not})" if why_not else ""),
                fix=(f"fix what the rejection of {kind!r} above says, pick one of the offered devices, or unset "
                     f"{requested_from}") if why_not else
                    f"pick one of the offered devices, install the plugin for {kind!r}, or unset {requested_from}",
            )
        chosen = matching[0]
        reason = f"requested by {requested_from}={requested}"
    else:
        if not ranked:
            raise UnavailableError(
                name="installed plugins",
                value="no device candidates",
                expected="at least the built-in cpu plugin",
                fix="check EZPZ_PLUGINS / EZPZ_DISABLE_PLUGINS: the built-in 'cpu' plugin must not be excluded",
            )
        chosen = ranked[0]
        reason = f"highest priority ({chosen.priority}) among {len(ranked)} candidate(s): {chosen.reason}"
    others = [
        Alternative(name=c.device_type, reason=f"priority {c.priority} ({c.vendor}): {c.reason}", plugin=c.plugin)
        for c in ranked
        if c is not chosen
    ]
    if chosen.shared:
        if index is not None and index != 0 and chosen.count <= index:
            raise UnavailableError(
                name=requested_from,
                value=requested,
                expected=f"index below {chosen.count} for {chosen.device_type}",
                fix="drop the index",
            )
        return DeviceChoice(candidate=chosen, index=index, reason=reason, alternatives=(*others, *rejected))
    if index is None:
        index = local_rank
        where = f"local rank {local_rank}"
    else:
        where = f"index from {requested_from}"
    if index >= chosen.count:
        var = chosen.visible_devices_var
        visible = f" (after {var})" if var else ""
        raise UnavailableError(
            name="local rank" if where.startswith("local") else requested_from,
            value=index,
            expected=f"below the {chosen.count} {chosen.device_type} device(s) visible{visible}; "
            f"this node runs {local_world_size} local rank(s)",
            fix=f"launch at most {chosen.count} process(es) per node, or make more devices visible"
            + (f" via {var}" if var else ""),
        )
    phys = ""
    if chosen.physical_ids and index < len(chosen.physical_ids):
        phys = f", physical device {chosen.physical_ids[index]}"
        if chosen.visible_devices_var:
            phys += f" via {chosen.visible_devices_var}"
    return DeviceChoice(
        candidate=chosen,
        index=index,
        reason=f"{reason}; index {index} from {where}{phys}",
        alternatives=(*others, *rejected),
    )


def choose_backend(
    options: Sequence[BackendOption], *, requested: str | None, device: str, requested_from: str = "EZPZ_BACKEND"
) -> BackendChoice:
    """First available option in the plugin's order, or the requested one if available."""
    if not options:
        raise ValueError("choose_backend needs at least one option")
    if requested:
        want = requested.strip().lower()
        for opt in options:
            if opt.name == want and opt.available:
                alts = [Alternative(name=o.name, reason=o.reason) for o in options if o is not opt]
                return BackendChoice(name=opt.name, reason=f"requested by {requested_from}={requested}: {opt.reason}", alternatives=alts)
        usable = [o.name for o in options if o.available]
        why = "; ".join(f"{o.name}: {o.reason}" for o in options if o.name == want)
        raise UnavailableError(
            name=requested_from,
            value=requested,
            expected=f"a backend available for {device}: {', '.join(usable) or 'none'}" + (f" ({why})" if why else ""),
            fix=f"set {requested_from} to one of {usable} or unset it to let ezpz choose",
        )
    tried: list[Alternative] = []
    for opt in options:
        if opt.available:
            later = [Alternative(name=o.name, reason=o.reason) for o in options[len(tried) + 1 :]]
            reason = opt.reason if not tried else f"{opt.reason} (after {', '.join(t.name for t in tried)} unavailable)"
            return BackendChoice(name=opt.name, reason=reason, alternatives=(*tried, *later))
        tried.append(Alternative(name=opt.name, reason=f"unavailable: {opt.reason}"))
    raise UnavailableError(
        name="collective backend",
        value=None,
        expected=f"one of {[o.name for o in options]} for {device}",
        fix="; ".join(f"{o.name}: {o.reason}" for o in options),
    )


def choose_precision(
    options: Sequence[PrecisionOption],
    *,
    requested: str,
    device: str,
    tf32: bool = False,
    tf32_reason: str = "TF32 does not apply to this device",
    requested_from: str = "EZPZ_PRECISION",
) -> AmpPolicy:
    """The AMP policy: the requested dtype if supported, else the first supported option.

    ``options`` are in the vendor's preference order for ``auto``. ``fp32``
    is always possible and means autocast off. A requested dtype the device
    cannot do raises, naming the device; it never silently disables autocast.
    """
    want = (requested or "auto").strip().lower()
    if want not in ("auto", *("bf16", "fp16", "fp32")):
        from ezpz.errors import ConfigError

        raise ConfigError(
            name=requested_from, value=requested, expected="one of auto, bf16, fp16, fp32", fix=f"set {requested_from}=auto"
        )
    alts = [Alternative(name=o.dtype, reason=(SUPPORTED if o.supported else UNSUPPORTED) + o.reason) for o in options]
    if want == "fp32":
        return AmpPolicy(
            dtype="fp32", autocast=False, grad_scaler=False, tf32=tf32, tf32_reason=tf32_reason,
            reason=f"fp32 requested by {requested_from}: autocast off", alternatives=alts,
        )
    if want != "auto":
        for o in options:
            if o.dtype == want:
                if not o.supported:
                    raise UnavailableError(
                        name=requested_from,
                        value=requested,
                        expected=f"a precision {device} supports: "
                        + ", ".join([x.dtype for x in options if x.supported] + ["fp32"]),
                        fix=f"{o.reason}; use EZPZ_PRECISION=auto to let ezpz pick",
                    )
                return AmpPolicy(
                    dtype=o.dtype, autocast=True, grad_scaler=o.grad_scaler, tf32=tf32, tf32_reason=tf32_reason,
                    reason=f"{o.dtype} requested by {requested_from}: {o.reason}",
                    alternatives=[a for a in alts if a.name != o.dtype],
                )
        raise UnavailableError(
            name=requested_from, value=requested,
            expected=f"a precision {device} offers: " + ", ".join([o.dtype for o in options] + ["fp32"]),
            fix="use EZPZ_PRECISION=auto",
        )
    for o in options:
        if o.supported and o.dtype != "fp32":
            return AmpPolicy(
                dtype=o.dtype, autocast=True, grad_scaler=o.grad_scaler, tf32=tf32, tf32_reason=tf32_reason,
                reason=f"auto: {o.reason}", alternatives=[a for a in alts if a.name != o.dtype],
            )
    return AmpPolicy(
        dtype="fp32", autocast=False, grad_scaler=False, tf32=tf32, tf32_reason=tf32_reason,
        reason=f"auto: no low-precision dtype supported on {device}, so fp32 with autocast off", alternatives=alts,
    )
