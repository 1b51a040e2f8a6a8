"""aiokafka's transactional producer (older request versions: InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit and EndTxn as aiokafka speaks them) against a real broker."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import ProducerFenced
from aiokafka.structs import TopicPartition

from odradek import EmbeddedBroker

from .conftest import create_topic, new_id


def _ignore_the_expected_fencing(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """aiokafka's sender leaves the fenced producer's ProducerFenced in a future of its own that
    nobody reads; that is the fencing the test asserts, and without this it is printed as an
    unretrieved exception when the future is collected, after pytest's summary line."""
    if not isinstance(context.get("exception"), ProducerFenced):
        loop.default_exception_handler(context)


async def _run(bootstrap: str, topic: str, group: str, tid: str) -> tuple[list[bytes], int]:
    asyncio.get_running_loop().set_exception_handler(_ignore_the_expected_fencing)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"kept-0", partition=0)
            await producer.send_and_wait(topic, b"kept-1", partition=1)
            await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 7}, group)
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"aborted", partition=0)
                raise RuntimeError("abort this one")
        except RuntimeError:
            pass
        # A second instance fences this one.
        other = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        await other.start()
        await other.stop()
        fenced = False
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"fenced", partition=0)
        except ProducerFenced:
            fenced = True
        assert fenced
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        consumer.assign(tps)
        committed = await consumer.committed(TopicPartition(topic, 0))
        for tp in tps:
            consumer.seek(tp, 0)
        values: list[bytes] = []
        for _ in range(40):
            batch = await consumer.getmany(timeout_ms=250)
            values += [m.value for msgs in batch.values() for m in msgs]
            if len(values) >= 3:
                break
        return sorted(values), committed
    finally:
        await consumer.stop()


def test_aiokafka_commit_abort_offsets_and_fencing(broker: EmbeddedBroker) -> None:
    topic = create_topic(broker.bootstrap_servers, 2)
    values, committed = asyncio.run(
        _run(broker.bootstrap_servers, topic, new_id("aio-group"), new_id("aio"))
    )
    # read_uncommitted: the aborted record is there too; control records never are.
    assert values == [b"aborted", b"kept-0", b"kept-1"]
    assert committed == 7
