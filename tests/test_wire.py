"""Decoding a Construct request's inputs (trainjobs.tools.provider.wire): values, numbers, secrets, unknowns, dependencies."""

import math

from google.protobuf import struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainjobs.tools.provider.wire import Leaf, decode_inputs

SIG = "4dabf18193072939515e22adb298388d"
SECRET = "1b47061264138c4ac30d75fd1eb44270"
OUTPUT = "d0e6a833031e9bbcd3f4e8bde6ca49a4"


def decode(inputs: dict, dependencies: dict | None = None) -> dict:
    struct = struct_pb2.Struct()
    struct.update(inputs)
    return decode_inputs(struct, dependencies or {})


def as_ints(value):
    """What the engine's doubles mean: integral numbers are integers."""
    if isinstance(value, dict):
        return {k: as_ints(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [as_ints(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


names = st.text(min_size=1, max_size=8).filter(lambda key: key != SIG)
plain_values = st.recursive(
    st.none() | st.booleans() | st.text(max_size=12)
    | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(names, children, max_size=4),
    max_leaves=12)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(names, plain_values, max_size=5))
def test_plain_values_decode_to_themselves_with_integral_numbers_as_integers(inputs):
    decoded = decode(inputs)
    assert decoded == as_ints(inputs)
    assert not any(isinstance(v, float) and v.is_integer() for v in _leaves(decoded))


def _leaves(value):
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_numbers_arrive_as_doubles_and_integral_ones_are_integers():
    decoded = decode({"numNodes": 2, "ratio": 0.5, "zero": 0.0, "big": 2.0**40})
    assert decoded == {"numNodes": 2, "ratio": 0.5, "zero": 0, "big": 2**40}
    assert type(decoded["numNodes"]) is int and type(decoded["zero"]) is int
    assert math.isclose(decoded["ratio"], 0.5)


def test_a_secret_on_a_value_stays_on_that_value():
    decoded = decode({"env": [{"name": "HF_TOKEN", "value": {SIG: SECRET, "value": "tok"}}, {"name": "A"}]})
    assert decoded == {"env": [{"name": "HF_TOKEN", "value": Leaf("tok", secret=True)}, {"name": "A"}]}


def test_a_secret_on_a_structure_marks_each_value_inside_it_as_lifted():
    decoded = decode({"labels": {SIG: SECRET, "value": {"team": "llm", "tier": 1}}})
    assert decoded == {"labels": {"team": Leaf("llm", secret=True, lifted=True),
                                  "tier": Leaf(1, secret=True, lifted=True)}}


def test_every_typed_unknown_sentinel_of_the_engine_is_an_unknown():
    sentinels = ["04da6b54-80e4-46f7-96ec-b56ff0331ba9", "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",
                 "3eeb2bf0-c639-47a8-9e75-3b44932eb421", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
                 "dd056dcd-154b-4c76-9bd3-c8f88648b5ff"]
    decoded = decode({f"k{i}": s for i, s in enumerate(sentinels)})
    assert set(decoded.values()) == {Leaf(known=False)}


def test_an_unknown_secret_and_an_unknown_output_value_keep_their_marks():
    decoded = decode({"a": {SIG: SECRET, "value": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"},
                      "b": {SIG: OUTPUT, "secret": True, "dependencies": ["urn:x"]}})
    assert decoded == {"a": Leaf(known=False, secret=True),
                       "b": Leaf(known=False, secret=True, dependencies=frozenset({"urn:x"}))}


def test_an_arguments_dependencies_go_to_each_value_unless_it_holds_output_values():
    decoded = decode({"env": [{"name": "A", "value": "x"}], "image": "img:1", "namespace": "ml"},
                     {"env": {"urn:a"}, "namespace": {"urn:ns"}})
    assert decoded["env"] == [{"name": Leaf("A", dependencies=frozenset({"urn:a"})),
                               "value": Leaf("x", dependencies=frozenset({"urn:a"}))}]
    assert decoded["image"] == "img:1"
    assert decoded["namespace"] == Leaf("ml", dependencies=frozenset({"urn:ns"}))
    with_output = decode({"env": [{"name": "A", "value": {SIG: OUTPUT, "value": "x", "dependencies": ["urn:o"]}}]},
                         {"env": {"urn:o"}})
    assert with_output["env"] == [{"name": "A", "value": Leaf("x", dependencies=frozenset({"urn:o"}))}]
