"""CQL unsigned vint (the length prefix of variable-width vector elements), against the
scylla-driver's own uvint_pack / uvint_unpack (cassandra.marshal). The C core's own unit test is
tests/c/test_vint.c."""
import pytest
from cassandra import marshal
from hypothesis import given, strategies as st

import bulkwire
from bulkwire import VectorCodec


@pytest.mark.parametrize("n", [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**56 - 1, 2**56,
                               2**63, 2**64 - 1])
def test_vint_pack_unpack(n):
    from cassandra.marshal import uvint_pack, uvint_unpack
    b = bulkwire._core._testing.vint_pack(n)
    assert bulkwire._core._testing.vint_unpack(b) == (n, len(b))
    assert bulkwire._core._testing.vint_unpack(b + b"\xff") == (n, len(b))
    if n < 2**63:
        assert b == uvint_pack(n)
        assert uvint_unpack(b) == (n, len(b))
    if len(b) > 1:
        with pytest.raises(ValueError, match="truncated"):
            bulkwire._core._testing.vint_unpack(b[:-1])


def test_vint_boundaries_in_text_and_blob():
    for n in (0, 1, 127, 128, 16383, 16384, 70000):
        payload = VectorCodec("blob", 1).serialize([b"x" * n])
        head = bulkwire._core._testing.vint_pack(n)
        assert payload == head + b"x" * n
        assert VectorCodec("blob", 1).deserialize(payload)[0] == b"x" * n
    assert bulkwire._core._testing.vint_pack(127) == b"\x7f"
    assert bulkwire._core._testing.vint_pack(128) == b"\x80\x80"
    assert bulkwire._core._testing.vint_pack(16384) == b"\xc0\x40\x00"


@given(st.integers(0, 2**63 - 1))
def test_pack_matches_the_driver(n):
    b = bulkwire._core._testing.vint_pack(n)
    assert b == marshal.uvint_pack(n)
    assert bulkwire._core._testing.vint_unpack(b) == marshal.uvint_unpack(b) == (n, len(b))


@given(st.binary(min_size=1, max_size=12))
def test_unpack_matches_the_driver_on_any_bytes(b):
    """Any bytes, canonical or not: the same value and length as the driver, and a refusal
    exactly where the driver would read past the end."""
    try:
        want = marshal.uvint_unpack(b)
    except IndexError:
        with pytest.raises(ValueError, match="truncated"):
            bulkwire._core._testing.vint_unpack(b)
        return
    assert bulkwire._core._testing.vint_unpack(b) == want
