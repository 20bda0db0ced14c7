"""The fuzz targets' plain decoding of their input bytes (importable without atheris)."""
import random


class Reader:
    """Plain decoding of the fuzzer's bytes. Past their end come bytes of a generator seeded
    with them, so that a short input still drives a whole tree, and every input a different
    one (under a sanitizer the fuzzer gets no coverage feedback and mutates short inputs)."""

    def __init__(self, data: bytes):
        self.data, self.pos = bytes(data), 0
        self.tail = random.Random(self.data).randbytes(4096)

    def _at(self, i: int) -> int:
        if i < len(self.data):
            return self.data[i]
        return self.tail[(i - len(self.data)) % len(self.tail)]

    def byte(self) -> int:
        b = self._at(self.pos)
        self.pos += 1
        return b

    def below(self, n: int) -> int:
        return self.byte() % n

    def chance(self, per256: int) -> bool:
        return self.byte() < per256

    def raw(self, n: int) -> bytes:
        taken = bytes(self._at(i) for i in range(self.pos, self.pos + n))
        self.pos += n
        return taken
