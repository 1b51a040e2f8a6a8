"""Types of the C extension ``_fastpath.c`` (the leader's checks of client batches)."""

from typing_extensions import Buffer

#: (producer id, epoch, first sequence, last sequence, base offset, last offset, max timestamp).
ProducerBatch = tuple[int, int, int, int, int, int, int]
#: (position, size, base offset, last offset, max timestamp) of one batch in the request.
BatchPosition = tuple[int, int, int, int, int]

#: (writev pieces, batch positions, next offset, max timestamp, record count, producer batch).
ScanResult = tuple[list[bytes | Buffer], list[BatchPosition], int, int, int, ProducerBatch | None]

def timestamp_delta_range(payload: Buffer, count: int, /) -> tuple[int, int] | None: ...
def scan_for_append(
    records: Buffer,
    next_offset: int,
    leader_epoch: int,
    max_message_bytes: int,
    now_ms: int,
    before_max_ms: int,
    after_max_ms: int,
    /,
) -> ScanResult | None: ...
