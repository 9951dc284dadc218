"""Structure from fuzz bytes: every decision a target makes is read from its input.

`Draw(data)` hands out integers, choices and byte strings from the front of `data`;
past the end every read returns zeros, so any input (and any prefix of one) is a valid
program. The same input always gives the same decisions, so a saved input replays
exactly (tests/fuzz/corpus) whichever engine produced it (atheris or the replay tests).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


class Finding(AssertionError):
    """A property of a fuzz target broke: a crash, a wrong result, an unbounded allocation.
    The message says which property; the input that produced it reproduces it."""


class Draw:
    """Sequential reader of decisions from fuzz bytes (zeros past the end)."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    @property
    def left(self) -> int:
        """Bytes not consumed yet."""
        return max(0, len(self._data) - self._pos)

    def take(self, n: int) -> bytes:
        """The next `n` bytes (zero-padded past the end)."""
        raw = self._data[self._pos:self._pos + n]
        self._pos += n
        return raw + bytes(n - len(raw)) if len(raw) < n else raw

    def uint(self, nbytes: int) -> int:
        """An unsigned big-endian integer of `nbytes` bytes."""
        return int.from_bytes(self.take(nbytes), "big")

    def below(self, n: int) -> int:
        """0..n-1 (n >= 1), from as few bytes as the range needs."""
        if n <= 1:
            return 0
        return self.uint((n - 1).bit_length() + 7 >> 3) % n

    def between(self, lo: int, hi: int) -> int:
        """lo..hi inclusive."""
        return lo + self.below(hi - lo + 1)

    def chance(self, per256: int) -> bool:
        """True with probability per256/256 (for random bytes)."""
        return self.uint(1) < per256

    def choice(self, options: Sequence[T]) -> T:
        """One of `options` (non-empty)."""
        return options[self.below(len(options))]

    def blob(self, max_len: int) -> bytes:
        """A byte string of 0..max_len bytes taken from the input."""
        return self.take(self.below(max_len + 1))

    def sized(self, size: int) -> bytes:
        """Exactly `size` bytes: a short seed from the input repeated (large bodies from
        a few input bytes, so bombs and 4 MiB frames need no 4 MiB inputs)."""
        seed = self.blob(16) or b"\0"
        return (seed * (size // len(seed) + 1))[:size]

    def rest(self) -> bytes:
        """Every byte not consumed yet."""
        raw = self._data[self._pos:]
        self._pos = len(self._data)
        return raw
