"""Produce: append each partition's record batches, answer per partition.

The records arrive as memoryviews into the request frame (hand-written decoder)
and are handed to the log unchanged; the log validates and patches them in place
and writes them in one call. Errors are per partition and use the Kafka error
code the storage or replication layer attached. acks=0 gets no response at all.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from kio.static.primitive import i32

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.produce import ProduceRequest
from odradek.server.context import RequestContext
from odradek.storage import TopicPartition
from odradek.storage.errors import RecordValidationError

log = logging.getLogger(__name__)


async def handle(ctx: RequestContext, request: ProduceRequest):
    cls = schemas.response_schema(ApiKey.PRODUCE, ctx.api_version)
    module = schemas.response_module(ApiKey.PRODUCE, ctx.api_version)
    replicas = ctx.broker.replica_manager
    if request.acks not in (-1, 0, 1):
        code = ErrorCode.invalid_required_acks
        results = {t.name: [(p.index, code, -1, None, -1, None, ()) for p in t.partitions] for t in request.topics}
    else:
        results = {}
        for topic in request.topics:
            out = results.setdefault(topic.name, [])
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.index)
                try:
                    if p.records is None:
                        raise KafkaError("null records", ErrorCode.invalid_record)
                    info = replicas.append_records(tp, p.records, request.acks, ctx.now_ms)
                except RecordValidationError as e:
                    record_errors = tuple(module.BatchIndexAndErrorMessage(batch_index=i32(index),
                                                                           batch_index_error_message=message)
                                          for index, message in e.record_errors) if ctx.api_version >= 8 else ()
                    out.append((p.index, e.error_code, -1, None, -1, str(e), record_errors))
                    continue
                except KafkaError as e:
                    out.append((p.index, e.error_code, -1, None, -1, str(e), ()))
                    continue
                except Exception as e:
                    log.exception("append to %s failed", tp)
                    out.append((p.index, ErrorCode.unknown_server_error, -1, None, -1, str(e), ()))
                    continue
                append_time = None
                if info.log_append_time_ms >= 0:
                    append_time = datetime.fromtimestamp(info.log_append_time_ms / 1000, tz=timezone.utc)
                start = replicas.partition(tp).log_start_offset
                out.append((p.index, ErrorCode.none, info.first_offset, append_time, start, None, ()))
    if request.acks == 0:
        return None
    topics = tuple(
        schemas.build(
            module.TopicProduceResponse,
            name=name,
            partition_responses=tuple(
                schemas.build(
                    module.PartitionProduceResponse,
                    index=index,
                    error_code=code,
                    base_offset=base_offset,
                    log_append_time=append_time,
                    log_start_offset=start,
                    record_errors=record_errors,
                    error_message=message,
                )
                for index, code, base_offset, append_time, start, message, record_errors in parts
            ),
        )
        for name, parts in results.items()
    )
    return schemas.build(cls, responses=topics, throttle_time=0)
