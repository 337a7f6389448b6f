"""Putting redirections in place and taking them out again: scoped wrappers and the undo list.

:func:`scoped` wraps a torch function so that calls from the user's project (:mod:`.scope`) run the
redirection and every other caller runs the original. A ``needs`` test, where given, runs first and lets the
common case (a call that asks nothing of CUDA) through without looking at the caller's frame.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from ezpz.cuda_compat.scope import Scope, Site

__all__ = ["Patches", "scoped"]

Redirect = Callable[..., Any]  # (site, *args, **kwargs) -> result


def scoped(scope: Scope, original: Callable[..., Any], redirect: Redirect,
           needs: Callable[[tuple[Any, ...], dict[str, Any]], bool] | None = None, *,
           through_torch: bool = False) -> Callable[..., Any]:
    """``original`` for callers outside the project; ``redirect(site, *args, **kwargs)`` for the project's.

    ``through_torch`` (with ``needs``): a call that torch's own code makes for the project (``nn.Linear(...,
    device='cuda')`` calls ``torch.empty``) counts as the project's, at the project's line
    (:meth:`.Scope.user_site`).
    """
    sites, lookup, getframe = scope.sites, scope.site, sys._getframe
    reach = scope.user_site if through_torch else (lambda frame: None)

    if needs is None:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            frame = getframe(1)
            site = sites.get((id(frame.f_code), frame.f_lasti), False)
            if site is False:
                site = lookup(frame)
            if site is None:
                return original(*args, **kwargs)
            return redirect(site, *args, **kwargs)
    else:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not needs(args, kwargs):
                return original(*args, **kwargs)
            frame = getframe(1)
            site = sites.get((id(frame.f_code), frame.f_lasti), False)
            if site is False:
                site = lookup(frame)
            if site is None:
                site = reach(frame)
                if site is None:
                    return original(*args, **kwargs)
            return redirect(site, *args, **kwargs)
    try:
        functools.update_wrapper(wrapper, original)
    except (AttributeError, TypeError):  # some builtins lack attributes update_wrapper copies
        pass
    wrapper.__ezpz_cuda_compat__ = True  # type: ignore[attr-defined]
    return wrapper


def caller_site(scope: Scope, depth: int = 2) -> Site | None:
    """The project call site ``depth`` frames up, or None (for ``__init__`` wrappers: the caller of the class)."""
    return scope.site(sys._getframe(depth))


class Patches:
    """Attributes replaced on torch's modules and classes, restored in reverse order by :meth:`undo`."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any, bool]] = []
        self.undone = False  # True once undo() ran (the mode is over)

    def replace(self, owner: Any, name: str, new: Any) -> Any:
        """Set ``owner.name = new``; return the value it replaced."""
        self.undone = False
        own = name in getattr(owner, "__dict__", {})
        old = owner.__dict__[name] if own else getattr(owner, name)
        self._undo.append((owner, name, old, own))
        setattr(owner, name, new)
        return old

    def undo(self) -> None:
        """Put every replaced attribute back."""
        self.undone = True
        while self._undo:
            owner, name, old, own = self._undo.pop()
            if own:
                setattr(owner, name, old)
            else:
                try:
                    delattr(owner, name)
                except AttributeError:
                    setattr(owner, name, old)


def scoped_class(scope: Scope, cls: type, redirect: Redirect) -> type:
    """A subclass of ``cls`` whose construction runs ``redirect(site, *args, **kwargs)`` for the project's calls.

    Other callers get a plain ``cls`` instance. A subclass, not a function, so that torch's own
    ``isinstance(x, torch.cuda.Event)`` checks keep working while the name is replaced.
    """
    getframe = sys._getframe

    def __new__(kind: type, *args: Any, **kwargs: Any) -> Any:
        site = scope.site(getframe(1))
        if site is None:
            return cls(*args, **kwargs)
        return redirect(site, *args, **kwargs)

    return front_class(cls, __new__)


def front_class(cls: type, new: Callable[..., Any]) -> type:
    """A subclass of ``cls`` made by ``new``; every ``cls`` instance (torch's own) still passes ``isinstance``."""
    meta = type(f"{cls.__name__}Front", (type(cls),), {
        "__instancecheck__": lambda front, obj: isinstance(obj, cls),
        "__subclasscheck__": lambda front, sub: issubclass(sub, cls)})
    return meta(cls.__name__, (cls,), {"__new__": new, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
                                       "__doc__": cls.__doc__, "__ezpz_cuda_compat__": True})
