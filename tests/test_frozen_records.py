"""ezpz.primitives.frozen_records.frozen answers as attrs.frozen does: the same repr text, equality and hashing."""

from __future__ import annotations

import pickle

import attrs
import pytest

from ezpz.primitives.frozen_records import frozen


@frozen
class Point:
    x: int
    y: int = 0


def _pair(**options):
    """The same record built by attrs.frozen and by ezpz's frozen."""

    def body() -> dict:
        return {"__annotations__": {"a": "int", "b": "str", "hidden": "int", "shown": "tuple", "loose": "float"},
                "b": "x", "hidden": attrs.field(default=0, repr=False), "shown": attrs.field(default=(), repr=len),
                "loose": attrs.field(default=0.0, eq=False), "__module__": __name__}

    theirs = attrs.frozen(type("Rec", (), body()), **options)
    ours = frozen(type("Rec", (), body()), **options)
    return theirs, ours


@pytest.mark.parametrize("options", [{}, {"kw_only": True}, {"slots": False}])
def test_repr_eq_and_hash_answer_as_attrs_does(options):
    theirs, ours = _pair(**options)
    for kwargs in ({"a": 1}, {"a": 2, "b": "y", "hidden": 5, "shown": (1, 2), "loose": 3.5}):
        assert repr(ours(**kwargs)) == repr(theirs(**kwargs))
    base = {"a": 1, "b": "y", "hidden": 5, "shown": (1,)}
    for make in (theirs, ours):
        one, same, other = make(**base), make(**base, loose=9.0), make(**{**base, "hidden": 6})
        assert one == same and not one != same and hash(one) == hash(same)  # loose is eq=False
        assert one != other and not one == other
        assert one.__eq__(object()) is NotImplemented
        assert len({one, same, other}) == 2
    assert ours(**base) != theirs(**base)  # another class, as attrs says for two attrs classes


def test_attrs_tools_and_immutability_are_attrs_own():
    _, ours = _pair()
    rec = ours(a=1)
    assert attrs.evolve(rec, a=2).a == 2 and attrs.asdict(rec)["b"] == "x"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        rec.a = 3
    assert pickle.loads(pickle.dumps(Point(1, 2))) == Point(1, 2)


def test_a_class_with_its_own_methods_or_options_is_left_to_attrs():
    @frozen(repr=False)
    class NoRepr:
        a: int

    @frozen
    class OwnRepr:
        a: int

        def __repr__(self) -> str:
            return "mine"

    assert repr(OwnRepr(1)) == "mine" and "NoRepr object at" in repr(NoRepr(1))
    assert not hasattr(NoRepr, "_ezpz_repr_fields") and not hasattr(OwnRepr, "_ezpz_repr_fields")


def test_a_subclass_names_itself_and_compares_its_own_fields():
    @frozen
    class Base:
        a: int

    @frozen
    class Child(Base):
        b: int = 0

    assert repr(Child(1, 2)) == "test_a_subclass_names_itself_and_compares_its_own_fields.<locals>.Child(a=1, b=2)" \
        .rsplit(">.", 1)[-1]
    assert Child(1, 2) != Child(1, 3) and Child(1, 2) == Child(1, 2) and Base(1) != Child(1, 0)


def test_the_core_records_use_it():
    from ezpz.decisions import SetupPlan
    from ezpz.facts import TorchBuild
    from ezpz.runtime import Runtime

    for cls in (TorchBuild, SetupPlan, Runtime):
        assert cls.__repr__.__module__ == "ezpz.primitives.frozen_records", cls
