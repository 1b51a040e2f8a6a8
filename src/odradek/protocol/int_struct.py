"""A struct.Struct of one integer, typed.

``struct.Struct.unpack_from`` returns ``tuple[Any, ...]``: its format string is opaque to
the type checker. The header fields of batches and frames are read on every request, so
their readers stay plain Struct methods (no wrapper, no cast at run time); annotating those
Structs with this Protocol is what tells mypy each yields one int.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from typing_extensions import Buffer


class IntStruct(Protocol):
    """A Struct whose format holds one integer (">q", ">i", ">I", ">h", ...)."""

    @property
    def size(self) -> int: ...

    def pack(self, value: int, /) -> bytes: ...

    def pack_into(self, buffer: Buffer, offset: int, value: int, /) -> None: ...

    def unpack(self, buffer: Buffer, /) -> tuple[int]: ...

    def unpack_from(self, buffer: Buffer, offset: int = 0, /) -> tuple[int]: ...
