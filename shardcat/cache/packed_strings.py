"""Strings by slot number, packed: their UTF-8 bytes in one bytearray, not a str object each (no I/O).

A Python str costs 49 bytes before its characters, and a dict or list slot more; a million full
names that way cost ~100 MB. Here a slot is its start and length in two packed arrays (6 bytes)
plus its bytes. A replaced string that fits is written over the old one in place; one that does not
goes at the end, and the space it leaves is counted; when more than half the bytes are dead the
buffer is rewritten with the live strings only, so it stays under twice what is live.
Reading a slot decodes its bytes (a new str each time): for messages and listings, not hot paths.
"""

from __future__ import annotations

from array import array

_COMPACT_FROM = 1 << 16      # dead bytes below this are never worth a rewrite


def _fits(values: array, value: int) -> array:
    """`values`, widened to a type holding `value` if it does not (lengths past 65,535, offsets past 4 GiB)."""
    if value < 1 << (8 * values.itemsize):
        return values
    return array("I" if values.itemsize < 4 else "Q", values)


class PackedStrings:
    """A list of strings (slot -> str), grown by `set` past its end; a slot never set reads as ""."""

    __slots__ = ("_bytes", "_start", "_len", "_dead")

    def __init__(self) -> None:
        self._bytes = bytearray()
        self._start = array("I")     # slot -> offset of its bytes
        self._len = array("H")       # slot -> their length
        self._dead = 0               # bytes no slot points at any more

    def __len__(self) -> int:
        return len(self._start)

    def get(self, slot: int) -> str:
        start = self._start[slot]
        return self._bytes[start:start + self._len[slot]].decode()

    def set(self, slot: int, value: str) -> None:
        data = value.encode()
        size = len(data)
        if slot == len(self._start) and size <= 0xFFFF and len(self._bytes) <= 0xFFFFFFFF:
            self._start.append(len(self._bytes))     # a new slot at the end (a load's every call)
            self._len.append(size)
            self._bytes += data
            return
        if slot >= len(self._start):
            grow = slot + 1 - len(self._start)
            self._start.frombytes(bytes(grow * self._start.itemsize))
            self._len.frombytes(bytes(grow * self._len.itemsize))
        old_start, old_size = self._start[slot], self._len[slot]
        if old_size >= size:
            if self._bytes[old_start:old_start + size] != data:
                self._bytes[old_start:old_start + size] = data
            self._dead += old_size - size
        else:
            self._dead += old_size
            end = len(self._bytes)
            self._start = _fits(self._start, end)
            self._len = _fits(self._len, size)
            self._bytes += data
            self._start[slot] = end
        self._len[slot] = size
        if self._dead > _COMPACT_FROM and self._dead * 2 > len(self._bytes):
            self._compact()

    def clear(self, slot: int) -> None:
        """Forget a slot's string (it reads as "" until set again)."""
        if slot < len(self._start):
            self._dead += self._len[slot]
            self._len[slot] = 0

    def _compact(self) -> None:
        old, out = self._bytes, bytearray()
        for slot, size in enumerate(self._len):
            start = self._start[slot]
            self._start[slot] = len(out)
            if size:
                out += old[start:start + size]
        self._bytes, self._dead = out, 0

    def copy(self) -> "PackedStrings":
        out = PackedStrings.__new__(PackedStrings)
        out._bytes, out._dead = bytearray(self._bytes), self._dead
        out._start, out._len = array(self._start.typecode, self._start), array(self._len.typecode, self._len)
        return out

    def nbytes(self) -> int:
        """The bytes its buffers take (for accounting and tests)."""
        return len(self._bytes) + len(self._start) * self._start.itemsize + len(self._len) * self._len.itemsize
