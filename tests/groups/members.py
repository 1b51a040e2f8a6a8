"""Group members of three client libraries, each polling in its own thread.

Every member records the values it was given and the assignments it received,
so tests can check delivery (at least once) and how partitions were shared.
"""

from __future__ import annotations

import asyncio
import threading

from confluent_kafka import Consumer

RANGE = "range"


class Member(threading.Thread):
    def __init__(self, bootstrap: str, group: str, topic: str, **options) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.topic, self.options = bootstrap, group, topic, options
        self.seen: list[bytes] = []
        self.assignment: set[int] = set()
        self.assignments = 0
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, self.error


class ConfluentMember(Member):
    def consume(self) -> None:
        def on_assign(_c, partitions):
            self.assignment = {p.partition for p in partitions}
            self.assignments += 1

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": RANGE,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "auto.commit.interval.ms": 100,
                **self.options,
            }
        )
        consumer.subscribe([self.topic], on_assign=on_assign)
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.1)
                if msg is not None and not msg.error():
                    self.seen.append(msg.value())
        finally:
            consumer.close()


class KafkaPythonMember(Member):
    def consume(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, assigned):
                member.assignment = {p.partition for p in assigned}
                member.assignments += 1

        consumer = KafkaConsumer(
            **{
                "bootstrap_servers": self.bootstrap,
                "group_id": self.group,
                "auto_offset_reset": "earliest",
                "partition_assignment_strategy": [RangePartitionAssignor],
                "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 200,
                "auto_commit_interval_ms": 100,
                # A leader whose join raced its first metadata answer assigns nothing ("No
                # partition metadata"); it rejoins on the next metadata refresh, which by
                # default is five minutes away. Seen under load in the full suite.
                "metadata_max_age_ms": 1000,
                **self.options,
            }
        )
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                for records in consumer.poll(100).values():
                    self.seen.extend(r.value for r in records)
        finally:
            consumer.close()


class AiokafkaMember(Member):
    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                pass

            async def on_partitions_assigned(self, assigned):
                member.assignment = {p.partition for p in assigned}
                member.assignments += 1

        consumer = AIOKafkaConsumer(
            **{
                "bootstrap_servers": self.bootstrap,
                "group_id": self.group,
                "auto_offset_reset": "earliest",
                "partition_assignment_strategy": (RangePartitionAssignor,),
                "session_timeout_ms": 6000,
                "heartbeat_interval_ms": 200,
                "auto_commit_interval_ms": 100,
                **self.options,
            }
        )
        consumer.subscribe([self.topic], listener=Listener())
        await consumer.start()
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for records in batches.values():
                    self.seen.extend(r.value for r in records)
        finally:
            await consumer.stop()
