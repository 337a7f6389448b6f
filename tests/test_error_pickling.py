"""Every exception ezpz defines survives pickle and a real ``multiprocessing`` (spawn) child, message and fields.

Ray, ``concurrent.futures``, ``multiprocessing`` and ``torch.multiprocessing.spawn`` ship a worker's exception to
the parent by pickling it; a keyword-only ``__init__`` made the default reduce fail there with a ``TypeError``
that hid the real error.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import inspect
import multiprocessing
import pickle
import traceback

import pytest

import ezpz.plugin_host.deadline
import ezpz.startup.environ
import ezpz.errors
import ezpz.inputs.files

_MODULES = (ezpz.errors, ezpz.plugin_host.deadline, ezpz.startup.environ, ezpz.inputs.files)


def _defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in ezpz's error-bearing modules, and every EzpzError subclass anywhere."""
    found = {obj for m in _MODULES for obj in vars(m).values()
             if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == m.__name__}
    todo = [ezpz.errors.EzpzError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo += cls.__subclasses__()
    return sorted((c for c in found if c.__module__.startswith("ezpz")), key=lambda c: (c.__module__, c.__qualname__))


def _arguments(cls: type[BaseException]) -> tuple[tuple, dict]:
    """Arguments for ``cls`` built from its signature: distinct values, so a swapped field would show."""
    if cls is ezpz.plugin_host.deadline.HookTimeout:
        frames = traceback.extract_stack()[-2:]
        return (ezpz.plugin_host.deadline.Call(hook="ezpz_probe_devices", plugin="slowpoke", started=1.0), 2.5, list(frames)), {}
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not params:  # Exception's own (*args, **kwargs): a message
        return (f"{cls.__name__}: something named went wrong",), {}
    values = {p.name: (2.5 if "timeout" in p.name else f"{p.name} of {cls.__name__}") for p in params}
    if "value" in values:
        values["value"] = {"nested": [1, 2]}  # any object, as ConfigError allows
    positional = tuple(values.pop(p.name) for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
    return positional, values


def _fields(err: BaseException) -> dict:
    return {k: (repr(v) if k == "frames" else v) for k, v in vars(err).items()}


CLASSES = _defined_exceptions()


def test_the_discovery_found_the_keyword_only_errors():
    names = {c.__name__ for c in CLASSES}
    assert {"ConfigError", "LaunchEnvError", "UnavailableError", "PluginTimeoutError", "RendezvousError",
            "JobMismatchError", "SetupError", "HookTimeout"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_pickle_round_trip_keeps_type_message_and_fields(cls):
    args, kwargs = _arguments(cls)
    err = cls(*args, **kwargs)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert str(back) == str(err) and back.args == err.args
    assert _fields(back) == _fields(err)
    if isinstance(err, ezpz.errors.ConfigError):
        assert (back.name, back.value, back.expected, back.fix) == (err.name, err.value, err.expected, err.fix)


def raise_in_child(module: str, qualname: str, args: tuple, kwargs: dict) -> None:
    """Run in a spawned child: build the error there and raise it, so the parent gets it through pickle."""
    cls = getattr(importlib.import_module(module), qualname)
    raise cls(*args, **kwargs)


def test_every_error_crosses_a_spawned_process():
    cases = [(c, *_arguments(c)) for c in CLASSES]
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        futures = [(cls, args, kwargs, pool.submit(raise_in_child, cls.__module__, cls.__qualname__, args, kwargs))
                   for cls, args, kwargs in cases]
        for cls, args, kwargs, future in futures:
            err = future.exception(timeout=120)
            expected = cls(*args, **kwargs)
            assert type(err) is cls, f"{cls.__name__} came back as {type(err).__name__}: {err}"
            assert str(err) == str(expected) and _fields(err) == _fields(expected)
