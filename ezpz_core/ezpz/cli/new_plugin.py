"""``ezpz new-plugin NAME``: write a complete device plugin package, ready to install, type-check and test.

Two shapes, from the templates in ``ezpz/cli/plugin_templates/`` (package data of the core):

* ``--device-type T`` (default: NAME): a device torch knows once the vendor's
  extension is imported; the probe imports it (``--extension``, default
  ``torch_T``), as the tutorial and the hook reference teach;
* ``--emulated``: a PrivateUse1 device emulated in Python on CPU memory
  (``plugins/ezpz-example-emu``'s device, generalised to the name), so scripts,
  DDP and checkpoints run before the hardware or its extension exists.

Either passes the conformance kit, ``mypy --strict`` and its own tests as written.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING

import ezpz
from ezpz.errors import ConfigError

if TYPE_CHECKING:
    from importlib.abc import Traversable  # importlib.resources.abc from Python 3.11

__all__ = ["add_parser", "render", "render_template", "run", "template_values"]

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_DEVICE = re.compile(r"^[a-z][a-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("new-plugin", help="write a new device plugin package (conformant, typed, tested)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="the plugin's entry-point name (lower case, digits, hyphens): ezpz-NAME, ezpz_NAME")
    p.add_argument("--device-type", metavar="T", help="the torch device type (default: NAME without hyphens)")
    p.add_argument("--emulated", action="store_true",
                   help="emulate the device in Python as a PrivateUse1 backend on CPU memory (torch 2.13)")
    p.add_argument("--extension", metavar="MODULE",
                   help="the vendor's torch extension the probe imports (default: torch_T; not with --emulated)")
    p.add_argument("--backend", metavar="B", help="the collective backend's name (default: Tccl)")
    p.add_argument("--vendor", help="the vendor name in decisions (default: NAME)")
    p.add_argument("-o", "--output", metavar="DIR", help="where to write the package (default: ./ezpz-NAME)")
    p.set_defaults(func=run)


def _check(name: str, value: str | None, pattern: re.Pattern[str], expected: str, fix: str) -> None:
    if value is not None and not pattern.match(value):
        raise ConfigError(name=name, value=value, expected=expected, fix=fix)


def template_values(
    name: str, *, device_type: str | None = None, emulated: bool = False, extension: str | None = None,
    backend: str | None = None, vendor: str | None = None,
) -> dict[str, str]:
    """Every placeholder the templates use, from the command's arguments (validated, each error naming its input)."""
    _check("NAME", name, _NAME, "lower-case letters and digits, words joined by single hyphens (nimbus, acme-npu)",
           "pick a name like 'nimbus'")
    device = device_type or name.replace("-", "_")
    _check("--device-type", device, _DEVICE, "a lower-case identifier (nimbus, npu)", "pick a device type like 'nimbus'")
    _check("--backend", backend, _DEVICE, "a lower-case identifier (nimbusccl)", "pick a backend name like 'nimbusccl'")
    _check("--extension", extension, _MODULE, "a dotted module name (torch_nimbus)", "name the module to import")
    if emulated and extension:
        raise ConfigError(name="--extension", value=extension, expected="no extension with --emulated (the plugin "
                          "registers the device itself)", fix="drop --extension, or drop --emulated")
    package = "ezpz_" + name.replace("-", "_")
    camel = "".join(part.capitalize() for part in device.split("_"))
    mine = backend or f"{device}ccl"
    values = {
        "name": name, "dist": f"ezpz-{name}", "package": package, "device": device, "Device": camel,
        "ENV": name.upper().replace("-", "_"), "backend": mine, "BACKEND": mine.upper(), "vendor": vendor or name,
        "extension": extension or f"torch_{device}", "visible_var": f"{device.upper()}_VISIBLE_DEVICES",
        "core_version": ezpz.__version__,
    }
    if emulated:
        values.update(
            what=f"the {device} accelerator, emulated on the CPU until the hardware exists",
            flags=f" --emulated{'' if device == name else ' --device-type ' + device}",
            extra_dependencies=', "torch>=2.13"',  # the Python PrivateUse1 hooks (torch._C._acc) the emulation uses
            mypy_overrides=(
                "\n# The emulated device (device.py, collectives.py) imports nothing from ezpz; it drives torch internals\n"
                "# (the PrivateUse1 hooks, c10d's overloaded ProcessGroup methods) whose stubs are incomplete, so its\n"
                "# errors are torch's stubs', not the plugin's: checked, not reported. plugin.py and core.py: strict.\n"
                f'[[tool.mypy.overrides]]\nmodule = ["{package}.device", "{package}.collectives"]\n'
                "ignore_errors = true\n"),
            more_modules=f", :mod:`{package}.device` the emulated device and :mod:`{package}.collectives` its "
                         "collectives",
            more_layout=(f"{package}/device.py      # the emulated torch device (PrivateUse1, kernels, memory, "
                         f"checkpoints)\n{package}/collectives.py # {mine}: its torch.distributed backend\n"),
            variant=_EMULATED_README.format(device=device, ENV=values["ENV"], backend=mine),
        )
    else:
        values.update(
            what=f"the {device} accelerator",
            flags="" if device == name else f" --device-type {device}",
            extra_dependencies="", mypy_overrides="", more_modules="", more_layout="",
            variant=_EXTENSION_README.format(device=device, extension=values["extension"], backend=mine,
                                             visible=values["visible_var"]),
        )
    return values


_EXTENSION_README = """\
The probe imports `{extension}`, the vendor's torch extension, which registers the
`{device}` device type with torch (and `{backend}` with torch.distributed); without it the
plugin rejects the device, saying why, and ezpz picks another. Visible devices follow
`{visible}`. What to make true for your hardware: the names above (`core.py` holds them),
the precisions and compile options in `core.py`, and the failure texts in
`plugin.ezpz_failure_signatures`."""

_EMULATED_README = """\
The device is emulated: `device.py` registers `{device}` with torch as a PrivateUse1
backend written in Python, its memory the CPU's, its kernels the CPU's, with autocast
keys, a device module (synchronize, set_device, memory statistics) and serialization
for checkpoints; `collectives.py` registers `{backend}` (gloo underneath). Scripts, DDP
and checkpoints run on it before the hardware exists: `EZPZ_DEVICE={device} python -m
ezpz.examples.train`. It is offered below cpu, so it is chosen only by name;
`EZPZ_{ENV}_EMULATED=0` hides it. When the hardware's torch extension exists, the probe
imports it instead (`ezpz new-plugin NAME --device-type {device}` writes that shape)."""


def _templates() -> Traversable:
    return files("ezpz.cli").joinpath("plugin_templates")


def render_template(relpath: str, values: Mapping[str, str]) -> str:
    """One template (``"emulated/device.py.tmpl"``) with ``values`` substituted; a missing value raises KeyError."""
    return Template(_templates().joinpath(relpath).read_text(encoding="utf-8")).substitute(values)


def _walk(root: Traversable, prefix: str = "") -> list[str]:
    out: list[str] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            out += _walk(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".tmpl"):
            out.append(prefix + entry.name)
    return out


def render(values: Mapping[str, str], *, emulated: bool) -> dict[str, str]:
    """The package's files, path (relative to its directory) -> text."""
    out: dict[str, str] = {}
    for variant in ("common", "emulated" if emulated else "extension"):
        for rel in _walk(_templates().joinpath(variant)):
            target = rel.removesuffix(".tmpl")
            if not target.startswith(("tests/", "pyproject.toml", "README.md")):
                target = f"{values['package']}/{target}"
            out[target] = render_template(f"{variant}/{rel}", values)
    return out


def _refuse_known_device(device: str) -> None:
    """``--emulated`` takes torch's PrivateUse1 key under the name: a device type torch has already cannot be it."""
    import torch

    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        return
    raise ConfigError(name="--device-type", value=device, expected="a device type this torch does not have yet "
                      "(the emulation registers it as PrivateUse1)", fix="pick a new name, or drop --emulated")


def run(args: argparse.Namespace) -> int:
    values = template_values(args.name, device_type=args.device_type, emulated=args.emulated,
                             extension=args.extension, backend=args.backend, vendor=args.vendor)
    if args.emulated:
        _refuse_known_device(values["device"])
    dest = Path(args.output or values["dist"])
    if dest.exists() and any(dest.iterdir()):
        raise ConfigError(name="--output", value=str(dest), expected="a directory that does not exist or is empty",
                          fix="remove it, or pass --output DIR")
    for rel, text in render(values, emulated=args.emulated).items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote {values['dist']} to {dest}/ (plugin {values['name']!r}, device {values['device']!r}"
          f"{', emulated' if args.emulated else ''}); next, in that directory:")
    print(f"  pip install -e '.[test]' && python -m mypy --strict {values['package']} && python -m pytest tests -q")
    return 0
