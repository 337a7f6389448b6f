"""Every environment variable ezpz reads, parsed and validated in one place."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import NamedTuple

from ezpz.errors import ConfigError

__all__ = ["Attempt", "HangSettings", "PluginSettings", "SetupSettings", "StragglerSettings", "is_first_rank",
           "parse_attempt", "parse_bool", "parse_failure_dir", "parse_hook_timeout", "parse_names",
           "parse_preempt_grace", "parse_step_hook", "parse_stragglers", "parse_world_shrank", "WorldShrank"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
PRECISION_CHOICES = ("auto", "bf16", "fp16", "fp32")
#: Backends a compile policy may name. ``none`` means "do not call torch.compile".
COMPILE_BACKENDS: tuple[str, ...] = ("inductor", "aot_eager", "openxla", "eager", "none")
#: What ``EZPZ_COMPILE`` / ``setup(compile=...)`` accept.
COMPILE_CHOICES: tuple[str, ...] = ("auto", *COMPILE_BACKENDS)
DEFAULT_TIMEOUT_S = 300.0
DEFAULT_HOOK_TIMEOUT_S = 60.0
HOOK_TIMEOUT_RANGE_S = (0.1, 86400.0)


def parse_bool(environ: Mapping[str, str], name: str, default: bool = False) -> bool:
    """``environ[name]`` as a yes/no: ``1/true/yes/on`` or ``0/false/no/off`` (any case); *default* when unset.

    Any other value raises :class:`~ezpz.errors.ConfigError` naming the variable, its value and what is allowed.
    """
    raw = environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(name=name, value=raw, expected="one of 1/0, true/false, yes/no, on/off", fix=f"set {name}=1 or unset it")


def parse_names(raw: str | None) -> frozenset[str] | None:
    """``None`` stays None (unset); ``""`` is the empty set; ``"a, b c"`` -> {"a", "b", "c"}.

    Names are separated by commas and/or whitespace; entries with other
    characters are kept as given, for discovery to report (:mod:`ezpz.plugin_host.names`).
    """
    if raw is None:
        return None
    return frozenset(n.lower() for n in re.split(r"[,\s]+", raw) if n)


#: Global-rank variables of the launchers ezpz detects (only "is this rank 0?" is read from them here).
_RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "PALS_RANKID", "SLURM_PROCID")


def is_first_rank(environ: Mapping[str, str]) -> bool:
    """Not a rank other than 0 of a launched job: the one process that writes ezpz's on-disk caches."""
    return all(environ.get(v, "0").strip() in ("0", "") for v in _RANK_VARIABLES)


class PluginSettings(NamedTuple):  # NamedTuples, not attrs: read at `import ezpz`, which must not load attrs
    """Plugin controls, read when plugins are discovered (at ``import ezpz``)."""

    allow: frozenset[str] | None = None
    deny: frozenset[str] = frozenset()
    autoload: bool = True
    strict: bool = False
    trace: bool = False
    hook_timeout_s: float = DEFAULT_HOOK_TIMEOUT_S
    entry_point_cache: bool = True
    entry_point_cache_writer: bool = True
    """False in every rank but the first of a launched job: one writer, not thousands, when the index is stale."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> PluginSettings:
        return cls(
            allow=parse_names(environ.get("EZPZ_PLUGINS")),
            deny=parse_names(environ.get("EZPZ_DISABLE_PLUGINS")) or frozenset(),
            autoload=not parse_bool(environ, "EZPZ_DISABLE_PLUGIN_AUTOLOAD"),
            strict=parse_bool(environ, "EZPZ_STRICT_PLUGINS"),
            trace=parse_bool(environ, "EZPZ_TRACE_PLUGINS"),
            hook_timeout_s=parse_hook_timeout(environ),
            entry_point_cache=parse_bool(environ, "EZPZ_CACHE", default=True),
            entry_point_cache_writer=is_first_rank(environ),
        )


def _first(environ: Mapping[str, str], *names: str) -> tuple[str | None, str]:
    for name in names:
        value = environ.get(name)
        if value is not None and value.strip():
            return value.strip(), name
    return None, names[0]


class SetupSettings(NamedTuple):
    """The user's requests for ``setup()``: keyword arguments win over the environment.

    ``*_from`` name where each value came from, so errors and the trace can say so.
    """

    device: str | None = None
    device_from: str = "EZPZ_DEVICE"
    backend: str | None = None
    backend_from: str = "EZPZ_BACKEND"
    precision: str = "auto"
    precision_from: str = "EZPZ_PRECISION"
    timeout_s: float = DEFAULT_TIMEOUT_S
    timeout_from: str = "default"
    log_all_ranks: bool = False
    compile: str = "auto"
    compile_from: str = "EZPZ_COMPILE"
    attempt: int = 0
    attempt_from: str = "default (no EZPZ_ATTEMPT or TORCHELASTIC_RESTART_COUNT)"
    failure_dir: str | None = None
    hang: HangSettings | None = None
    """The hang-budget policy (``EZPZ_HANG_BUDGET*``); None is the default policy."""
    preempt_grace_s: float = 20.0
    """``EZPZ_PREEMPT_GRACE``: seconds from a SIGTERM until a rank that has not ended exits anyway."""
    stragglers: StragglerSettings = None  # type: ignore[assignment]  # resolve() always sets it
    step_hook: bool = True
    """``EZPZ_STEP_HOOK``: a lazy device's step boundary also runs after every ``optimizer.step()`` (default on)."""
    world_shrank: WorldShrank | None = None
    """``EZPZ_WORLD_SHRANK``: ``ezpz launch --min-nodes`` ran this attempt on fewer ranks than the job began with."""

    @classmethod
    def resolve(
        cls,
        environ: Mapping[str, str],
        *,
        device: str | None = None,
        backend: str | None = None,
        precision: str | None = None,
        timeout: float | None = None,
        compile: str | None = None,
    ) -> SetupSettings:
        env_device, device_var = _first(environ, "EZPZ_DEVICE", "TORCH_DEVICE")
        env_backend, backend_var = _first(environ, "EZPZ_BACKEND", "TORCH_BACKEND")
        env_precision, _ = _first(environ, "EZPZ_PRECISION")
        if precision is not None:
            prec, prec_from = precision, "setup(precision=...)"
        else:
            prec, prec_from = env_precision or "auto", "EZPZ_PRECISION"
        if prec.strip().lower() not in PRECISION_CHOICES:
            raise ConfigError(
                name=prec_from, value=prec, expected=f"one of {', '.join(PRECISION_CHOICES)}",
                fix=f"set {prec_from} to one of {', '.join(PRECISION_CHOICES)} (auto lets the device plugin pick)",
            )
        if timeout is not None:
            timeout_s, timeout_from = _timeout(timeout, "setup(timeout=...)"), "setup(timeout=...)"
        elif environ.get("EZPZ_TIMEOUT", "").strip():
            timeout_s, timeout_from = _timeout(environ["EZPZ_TIMEOUT"], "EZPZ_TIMEOUT"), "EZPZ_TIMEOUT"
        else:
            timeout_s, timeout_from = DEFAULT_TIMEOUT_S, "default"
        compile_from = "setup(compile=...)" if compile is not None else "EZPZ_COMPILE"
        compile_raw = compile if compile is not None else environ.get("EZPZ_COMPILE", "auto")
        compile_request = parse_compile_request(compile_raw, name=compile_from)
        attempt = parse_attempt(environ)
        return cls(
            device=device if device is not None else env_device,
            device_from="setup(device=...)" if device is not None else device_var,
            backend=backend if backend is not None else env_backend,
            backend_from="setup(backend=...)" if backend is not None else backend_var,
            precision=prec.strip().lower(),
            precision_from=prec_from,
            timeout_s=timeout_s,
            timeout_from=timeout_from,
            log_all_ranks=parse_bool(environ, "EZPZ_LOG_ALL_RANKS"),
            compile=compile_request,
            compile_from=compile_from,
            attempt=attempt.number,
            attempt_from=attempt.source,
            failure_dir=parse_failure_dir(environ),
            hang=HangSettings.from_environ(environ),
            preempt_grace_s=parse_preempt_grace(environ),
            stragglers=parse_stragglers(environ),
            step_hook=parse_step_hook(environ),
            world_shrank=parse_world_shrank(environ),
        )


DEFAULT_STRAGGLER_EVERY = 25
DEFAULT_STRAGGLER_FACTOR = 1.5
_MAX_STRAGGLER_EVERY = 1_000_000
STRAGGLER_FACTOR_RANGE = (1.05, 1000.0)


class StragglerSettings(NamedTuple):
    """Straggler detection: compare the ranks every ``every`` steps (0 = off); slow = ``factor`` x the median."""

    every: int = DEFAULT_STRAGGLER_EVERY
    factor: float = DEFAULT_STRAGGLER_FACTOR
    source: str = "default"


def parse_stragglers(environ: Mapping[str, str]) -> StragglerSettings:
    """``EZPZ_STRAGGLER_EVERY`` (steps between reports, 0 = off) and ``EZPZ_STRAGGLER_FACTOR`` (x the median).

    A bad value raises :class:`~ezpz.errors.ConfigError` naming the variable, its value, what is allowed and the fix.
    """
    every, factor, parts = DEFAULT_STRAGGLER_EVERY, DEFAULT_STRAGGLER_FACTOR, []
    raw = environ.get("EZPZ_STRAGGLER_EVERY", "")
    if raw.strip():
        text = raw.strip()
        if not (text.isascii() and text.isdigit() and int(text) <= _MAX_STRAGGLER_EVERY):
            raise ConfigError(name="EZPZ_STRAGGLER_EVERY", value=raw,
                              expected=f"a whole number of steps from 0 (off) to {_MAX_STRAGGLER_EVERY}",
                              fix=f"set EZPZ_STRAGGLER_EVERY=0 to turn detection off, or a number of steps "
                                  f"between reports, e.g. {DEFAULT_STRAGGLER_EVERY}; or unset it")
        every = int(text)
        parts.append(f"EZPZ_STRAGGLER_EVERY={every}")
    raw = environ.get("EZPZ_STRAGGLER_FACTOR", "")
    if raw.strip():
        lo, hi = STRAGGLER_FACTOR_RANGE
        try:
            factor = float(raw)
        except ValueError:
            factor = math.nan
        if not (math.isfinite(factor) and lo <= factor <= hi):
            raise ConfigError(name="EZPZ_STRAGGLER_FACTOR", value=raw,
                              expected=f"a number from {lo:g} to {hi:g} (how many times the median step is slow)",
                              fix=f"set EZPZ_STRAGGLER_FACTOR to e.g. {DEFAULT_STRAGGLER_FACTOR:g}, or unset it")
        parts.append(f"EZPZ_STRAGGLER_FACTOR={factor:g}")
    return StragglerSettings(every, factor, " + ".join(parts) or "default")


def parse_step_hook(environ: Mapping[str, str]) -> bool:
    """``EZPZ_STEP_HOOK``: 1 (default) runs a lazy device's step boundary after every ``optimizer.step()``;
    0 leaves it to the script (``rt.step()``, ``torch_xla.sync()``). A bad value raises a ConfigError naming it."""
    raw = environ.get("EZPZ_STEP_HOOK")
    if raw is None or not raw.strip():
        return True
    value = raw.strip().lower()
    if value in _TRUE or value in _FALSE:
        return value in _TRUE
    raise ConfigError(name="EZPZ_STEP_HOOK", value=raw,
                      expected="1 (a lazy device's step boundary also runs after every optimizer.step(), the "
                               "default) or 0 (the script marks its steps itself)",
                      fix="set EZPZ_STEP_HOOK=0 if your script calls rt.step() or torch_xla.sync() where each step "
                          "ends, or unset it")


TIMEOUT_RANGE_S = (1.0, 7 * 24 * 3600.0)
"""``EZPZ_TIMEOUT`` and ``setup(timeout=...)``: from 1 second to 7 days."""


def seconds_in_range(raw: object, name: str, bounds: tuple[float, float], fix: str) -> float:
    """``raw`` as a finite number of seconds within ``bounds``; ConfigError naming ``name`` otherwise.

    nan, inf, overflowing values (``1e999``) and anything outside the range are refused.
    """
    lo, hi = bounds
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        value = math.nan
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(name=name, value=raw, expected=f"a number of seconds from {lo:g} to {hi:g}", fix=fix)
    return value


DEFAULT_PREEMPT_GRACE_S = 20.0
PREEMPT_GRACE_RANGE_S = (1.0, 86400.0)


def parse_preempt_grace(environ: Mapping[str, str]) -> float:
    """``EZPZ_PREEMPT_GRACE``: seconds a SIGTERMed rank has to reach the agreed step and save, within the range."""
    raw = environ.get("EZPZ_PREEMPT_GRACE", "")
    if not raw.strip():
        return DEFAULT_PREEMPT_GRACE_S
    return seconds_in_range(
        raw, "EZPZ_PREEMPT_GRACE", PREEMPT_GRACE_RANGE_S,
        fix="set EZPZ_PREEMPT_GRACE to less than the scheduler's time between SIGTERM and SIGKILL (Slurm's KillWait, "
            "30 s by default), e.g. 20, or unset it")


def parse_hook_timeout(environ: Mapping[str, str]) -> float:
    """``EZPZ_HOOK_TIMEOUT``: seconds one plugin hook call may run, within :data:`HOOK_TIMEOUT_RANGE_S`."""
    raw = environ.get("EZPZ_HOOK_TIMEOUT", "")
    if not raw.strip():
        return DEFAULT_HOOK_TIMEOUT_S
    return seconds_in_range(
        raw, "EZPZ_HOOK_TIMEOUT", HOOK_TIMEOUT_RANGE_S,
        fix=f"set EZPZ_HOOK_TIMEOUT to how long one plugin hook may run, e.g. {DEFAULT_HOOK_TIMEOUT_S:g}, or unset it",
    )


def _timeout(raw: object, name: str) -> float:
    return seconds_in_range(
        raw, name, TIMEOUT_RANGE_S,
        fix=f"set {name} to the longest you will wait for every rank to arrive, e.g. 300 (1 s to 7 days)",
    )


_MAX_ATTEMPT = 1_000_000


class Attempt(NamedTuple):
    """Which attempt of the job this process belongs to (0 = the first), and where that number came from."""

    number: int = 0
    source: str = "default (no EZPZ_ATTEMPT or TORCHELASTIC_RESTART_COUNT)"


def _count(environ: Mapping[str, str], name: str, fix: str) -> int | None:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return None
    text = raw.strip()
    if not (text.isascii() and text.isdigit() and int(text) <= _MAX_ATTEMPT):
        raise ConfigError(name=name, value=raw, expected=f"a whole number from 0 to {_MAX_ATTEMPT}", fix=fix)
    return int(text)


def parse_attempt(environ: Mapping[str, str]) -> Attempt:
    """The attempt: ``EZPZ_ATTEMPT`` (``ezpz launch``'s retries) plus ``TORCHELASTIC_RESTART_COUNT`` (torchrun's).

    Both are non-negative integers; either may be unset (0). A bad value raises
    :class:`~ezpz.errors.ConfigError` naming the variable.
    """
    ours = _count(environ, "EZPZ_ATTEMPT", "unset EZPZ_ATTEMPT (ezpz launch sets it per retry) or set it to 0, 1, ...")
    elastic = _count(environ, "TORCHELASTIC_RESTART_COUNT",
                     "torchrun sets TORCHELASTIC_RESTART_COUNT itself: unset it outside torchrun")
    parts = [f"{name}={value}" for name, value in (("EZPZ_ATTEMPT", ours), ("TORCHELASTIC_RESTART_COUNT", elastic))
             if value is not None]
    if not parts:
        return Attempt()
    return Attempt((ours or 0) + (elastic or 0), " + ".join(parts))


class WorldShrank(NamedTuple):
    """``EZPZ_WORLD_SHRANK`` = ``"<from>-><to>: <why>"``: the job began on ``before`` ranks, this attempt has ``after``."""

    before: int
    after: int
    why: str

    def describe(self) -> str:
        return f"{self.before} -> {self.after} ranks: {self.why}"


_SHRANK = re.compile(r"\A\s*(\d{1,9})\s*->\s*(\d{1,9})\s*:\s*(\S.*)\Z", re.S)


def parse_world_shrank(environ: Mapping[str, str]) -> WorldShrank | None:
    """``EZPZ_WORLD_SHRANK`` (set by ``ezpz launch --min-nodes`` on an attempt run on fewer hosts): None when unset.

    The value is ``"<ranks before>-><ranks now>: <why>"`` with ``before > now >= 1``; anything else raises
    :class:`~ezpz.errors.ConfigError` naming the variable.
    """
    raw = environ.get("EZPZ_WORLD_SHRANK")
    if raw is None or not raw.strip():
        return None
    found = _SHRANK.match(raw[:4096])
    before, after = (int(found.group(1)), int(found.group(2))) if found else (0, 0)
    if not found or not before > after >= 1:
        raise ConfigError(name="EZPZ_WORLD_SHRANK", value=raw[:200],
                          expected="'<ranks before>-><ranks now>: <why>' with before > now >= 1, e.g. "
                                   "'8->4: host nid01 excluded (lost_peer)'",
                          fix="unset EZPZ_WORLD_SHRANK: ezpz launch --min-nodes sets it on an attempt that runs on "
                              "fewer hosts")
    return WorldShrank(before, after, found.group(3).strip())


def parse_failure_dir(environ: Mapping[str, str]) -> str | None:
    """``EZPZ_FAILURE_DIR``: where a rank that ends abnormally writes its failure record; None (unset) = nowhere.

    Must be a path (absolute, or relative to the working directory) that is not
    an existing non-directory; the directory itself is created when a record is written.
    """
    raw = environ.get("EZPZ_FAILURE_DIR")
    if raw is None or not raw.strip():
        return None
    fix = "set EZPZ_FAILURE_DIR to a directory this rank may create and write (ezpz launch sets one per attempt)"
    if "\0" in raw or len(raw) > 4096:
        raise ConfigError(name="EZPZ_FAILURE_DIR", value=raw[:200], expected="a directory path", fix=fix)
    import os

    path = os.path.abspath(os.path.expanduser(raw.strip()))
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(name="EZPZ_FAILURE_DIR", value=raw, expected="a directory (this is an existing file)",
                          fix=fix)
    return path


def parse_compile_request(raw: object, *, name: str) -> str:
    """Validate ``EZPZ_COMPILE`` / ``setup(compile=...)``: one of :data:`COMPILE_CHOICES` (case-insensitive)."""
    text = raw.strip().lower() if isinstance(raw, str) else None
    aliases = {"off": "none", "0": "none", "false": "none", "": "auto"}
    text = aliases.get(text, text) if text is not None else None
    if text not in COMPILE_CHOICES:
        raise ConfigError(
            name=name, value=raw, expected=f"one of {', '.join(COMPILE_CHOICES)}",
            fix=f"set {name} to one of {', '.join(COMPILE_CHOICES)} (auto lets the device plugin pick; none or off "
                "turns compiling off)",
        )
    return text


DEFAULT_HANG_FACTOR = 10.0
DEFAULT_HANG_FLOOR_S = 10.0
DEFAULT_HANG_WARMUP = 20
HANG_FACTOR_RANGE = (1.0, 1000.0)
HANG_FLOOR_RANGE_S = (0.5, 7 * 24 * 3600.0)
HANG_WARMUP_RANGE = (2, 1_000_000)


class HangSettings(NamedTuple):
    """``EZPZ_HANG_BUDGET``, ``EZPZ_HANG_BUDGET_FACTOR``, ``EZPZ_HANG_BUDGET_FLOOR``, ``EZPZ_HANG_BUDGET_WARMUP``."""

    enabled: bool = True
    factor: float = DEFAULT_HANG_FACTOR
    floor_s: float = DEFAULT_HANG_FLOOR_S
    warmup: int = DEFAULT_HANG_WARMUP

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> HangSettings:
        """Read and check the four variables; :class:`~ezpz.errors.ConfigError` naming a bad one."""
        enabled = parse_bool(environ, "EZPZ_HANG_BUDGET", default=True)
        factor = _bounded(environ, "EZPZ_HANG_BUDGET_FACTOR", DEFAULT_HANG_FACTOR, HANG_FACTOR_RANGE,
                          "a multiple of the recent p99 step time", "e.g. 10")
        floor_s = _bounded(environ, "EZPZ_HANG_BUDGET_FLOOR", DEFAULT_HANG_FLOOR_S, HANG_FLOOR_RANGE_S,
                           "a number of seconds", "the shortest budget a step ever gets, e.g. 10")
        raw = environ.get("EZPZ_HANG_BUDGET_WARMUP", "").strip()
        warmup = DEFAULT_HANG_WARMUP
        if raw:
            lo, hi = HANG_WARMUP_RANGE
            if not (raw.isascii() and raw.isdigit() and lo <= int(raw) <= hi):
                raise ConfigError(name="EZPZ_HANG_BUDGET_WARMUP", value=raw,
                                  expected=f"a whole number of steps from {lo} to {hi}",
                                  fix=f"set EZPZ_HANG_BUDGET_WARMUP to the steps seen before budgets are learned, "
                                      f"e.g. {DEFAULT_HANG_WARMUP}")
            warmup = int(raw)
        return cls(enabled=enabled, factor=factor, floor_s=floor_s, warmup=warmup)

    def describe(self, timeout_s: float) -> str:
        """The policy in one line (what ``rt.explain()`` shows)."""
        if not self.enabled:
            return f"off (EZPZ_HANG_BUDGET=0): a stalled step waits for EZPZ_TIMEOUT ({timeout_s:g} s)"
        return (f"after {self.warmup} steps: {self.factor:g} x the recent p99 step time, at least "
                f"{self.floor_s:g} s, at most EZPZ_TIMEOUT ({timeout_s:g} s); before that EZPZ_TIMEOUT")


def _bounded(environ: Mapping[str, str], name: str, default: float, bounds: tuple[float, float], what: str,
             example: str) -> float:
    """``environ[name]`` as a finite number within ``bounds`` (``default`` when unset); ConfigError otherwise."""
    raw = environ.get(name, "")
    if not raw.strip():
        return default
    lo, hi = bounds
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        value = math.nan
    if not (math.isfinite(value) and lo <= value <= hi):
        raise ConfigError(name=name, value=raw, expected=f"{what} from {lo:g} to {hi:g}",
                          fix=f"set {name} to {example}, or unset it")
    return value
