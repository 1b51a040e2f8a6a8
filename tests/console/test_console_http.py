"""The console's pages over HTTP against a real broker: what each page shows, and the page
a user gets for bad input (unknown names, huge offsets, binary payloads, a broker that is
down): a sentence and a status, never a traceback."""

from __future__ import annotations

import html
import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.console.conftest import ConsoleProcess, EventStream, fetch, free_port


@pytest.fixture(scope="module")
def admin(odradek_broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": odradek_broker.bootstrap_servers})


@pytest.fixture(scope="module")
def producer(odradek_broker) -> Producer:
    return Producer({"bootstrap.servers": odradek_broker.bootstrap_servers})


def create(admin: AdminClient, name: str, partitions: int = 1, **configs: str) -> None:
    new = NewTopic(name, num_partitions=partitions, config=configs)
    admin.create_topics([new])[name].result(30)


def rows(body: str, table: str) -> list[list[str]]:
    """The text of each body cell of the table with id ``table``, tags stripped."""
    section = body[body.index(f'<table id="{table}"') :]
    section = section[section.index("<tbody>") : section.index("</tbody>")]
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", section, re.S)
    ]


def error_of(body: str) -> str:
    match = re.search(r'<p class="error" id="error">(.*?)</p>', body, re.S)
    assert match, body
    return html.unescape(match.group(1))


def test_overview_counts_the_partitions_the_broker_leads(console, admin, odradek_broker):
    create(admin, "overview-topic", partitions=4)
    page = fetch(console.url + "/")
    assert page.status == 200
    metadata = admin.list_topics(timeout=30)
    total = sum(len(t.partitions) for t in metadata.topics.values())
    (broker,) = rows(page.body, "brokers")
    host, port = odradek_broker.bootstrap_servers.rsplit(":", 1)
    assert broker[:6] == ["1", host, port, "-", str(total), "controller"]
    # The broker's own ApiVersions answer, asked by the console.
    assert re.fullmatch(
        r"\d+ APIs; Produce v\d+-v\d+, Fetch v\d+-v\d+, Metadata v\d+-v\d+", broker[6]
    ), broker[6]
    assert f'<td id="partitions">{total}</td>' in page.body


def test_topics_are_searched_and_paged(console, admin):
    futures = admin.create_topics([NewTopic(f"paged-{i:03}", 1) for i in range(60)])
    for future in futures.values():
        future.result(30)
    first = fetch(console.url + "/topics?q=PAGED-")
    names = [row[0] for row in rows(first.body, "topics")]
    assert names == [f"paged-{i:03}" for i in range(50)]
    assert "page 1 of 2 (60 in all)" in first.body
    second = fetch(console.url + "/topics?q=paged-&page=2")
    assert [row[0] for row in rows(second.body, "topics")] == [
        f"paged-{i:03}" for i in range(50, 60)
    ]
    # A page number past the end shows the last page; nonsense shows the first.
    assert rows(fetch(console.url + "/topics?q=paged-&page=99").body, "topics") == rows(
        second.body, "topics"
    )
    assert rows(fetch(console.url + "/topics?q=paged-&page=x").body, "topics")[0][0] == "paged-000"
    assert rows(fetch(console.url + "/topics?q=no-such-thing").body, "topics") == [
        ["No topic matches."]
    ]


def test_topic_page_shows_partitions_offsets_and_configs(console, admin, producer):
    create(admin, "detail-topic", partitions=2, **{"retention.ms": "3600000"})
    for i in range(5):
        producer.produce("detail-topic", value=b"v%d" % i, partition=1)
    assert producer.flush(30) == 0
    page = fetch(console.url + "/topics/detail-topic")
    assert page.status == 200
    assert rows(page.body, "partitions") == [
        ["0", "1", "1", "1", "0", "0", "0"],
        ["1", "1", "1", "1", "0", "5", "5"],
    ]
    configs = {row[0]: row[1:] for row in rows(page.body, "configs")}
    assert configs["retention.ms"] == ["3600000", "DYNAMIC_TOPIC_CONFIG"]
    assert configs["cleanup.policy"][0] == "delete"


def test_a_topic_with_many_partitions_is_paged_and_browsed_one_partition_at_a_time(console, admin):
    create(admin, "wide", partitions=150)
    first = fetch(console.url + "/topics/wide")
    assert [r[0] for r in rows(first.body, "partitions")] == [str(p) for p in range(100)]
    assert "page 1 of 2 (150 in all)" in first.body
    second = fetch(console.url + "/topics/wide?page=2")
    assert [r[0] for r in rows(second.body, "partitions")] == [str(p) for p in range(100, 150)]
    everything = fetch(console.url + "/topics/wide/messages")
    assert everything.status == 400
    assert error_of(everything.body) == "topic 'wide' has 150 partitions: choose one to browse"
    assert fetch(console.url + "/topics/wide/messages?partition=149").status == 200


def test_topic_create_add_partitions_and_delete_through_forms(console, admin):
    created = fetch(
        console.url + "/topics",
        {
            "name": "form-topic",
            "partitions": "2",
            "replication_factor": "1",
            "configs": "cleanup.policy=compact\n",
        },
    )
    assert created.status == 200 and created.url.endswith("/topics/form-topic?created=1")
    assert len(rows(created.body, "partitions")) == 2
    assert {r[0]: r[1] for r in rows(created.body, "configs")}["cleanup.policy"] == "compact"

    again = fetch(console.url + "/topics", {"name": "form-topic", "partitions": "1"})
    assert again.status == 400
    assert "TOPIC_ALREADY_EXISTS" in error_of(again.body)

    grown = fetch(console.url + "/topics/form-topic/partitions", {"total": "3"})
    assert len(rows(grown.body, "partitions")) == 3
    shrunk = fetch(console.url + "/topics/form-topic/partitions", {"total": "1"})
    assert shrunk.status == 400 and "INVALID_PARTITIONS" in error_of(shrunk.body)

    deleted = fetch(console.url + "/topics/form-topic/delete", {})
    assert deleted.status == 200 and "Topic form-topic deleted." in deleted.body
    assert "form-topic" not in admin.list_topics(timeout=30).topics


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"name": "", "partitions": "1"}, "a topic needs a name"),
        (
            {"name": "bad-count", "partitions": "three"},
            "partitions must be a whole number, not 'three'",
        ),
        ({"name": "bad-config", "configs": "retention.ms"}, "configs: expected name=value"),
        ({"name": "bad name!"}, 'TOPIC_EXCEPTION: Topic name "bad name!" is illegal'),
    ],
)
def test_a_bad_create_form_is_a_400_with_its_reason(console, form, message):
    page = fetch(console.url + "/topics", form)
    assert page.status == 400
    assert message in error_of(page.body)


def test_message_browser_shows_text_json_hex_and_headers(console, admin, producer):
    create(admin, "payloads", partitions=1)
    produced = [
        (b"plain", b"hello world", []),
        (None, b'{"b": [1, 2], "a": "\xc3\xa9"}', [("trace", b"abc")]),
        (b"\xff\xfe", b"\x00\x01\x80binary", [("bin", b"\xc3\x28")]),
    ]
    for key, value, headers in produced:
        producer.produce("payloads", key=key, value=value, headers=headers, partition=0)
    assert producer.flush(30) == 0
    page = fetch(console.url + "/topics/payloads/messages?partition=0&offset=0")
    assert page.status == 200
    assert '<pre class="text">hello world</pre>' in page.body
    assert rows(page.body, "messages")[1][4] == '{\n  "b": [\n    1,\n    2\n  ],\n  "a": "é"\n}'
    assert '<pre class="null">null</pre>' in page.body
    assert '<pre class="hex">00000000  ff fe</pre>' in page.body
    assert '<pre class="hex">00000000  00 01 80 62 69 6e 61 72 79</pre>' in page.body
    assert '<b>trace</b> <pre class="text">abc</pre>' in page.body
    assert '<b>bin</b> <pre class="hex">00000000  c3 28</pre>' in page.body
    assert [r[:2] for r in rows(page.body, "messages")] == [["0", "0"], ["0", "1"], ["0", "2"]]


def test_message_browser_seeks_by_offset_timestamp_and_partition(console, admin, producer):
    create(admin, "seeking", partitions=2)
    for i in range(10):
        producer.produce("seeking", value=b"p0-%d" % i, partition=0, timestamp=1_000_000 + i * 1000)
        producer.produce("seeking", value=b"p1-%d" % i, partition=1, timestamp=1_000_500 + i * 1000)
    assert producer.flush(30) == 0
    url = console.url + "/topics/seeking/messages"

    def values(query: str) -> list[str]:
        page = fetch(f"{url}?{query}")
        assert page.status == 200, page.body
        return [row[4] for row in rows(page.body, "messages") if len(row) > 1]

    assert values("partition=1&offset=7") == ["p1-7", "p1-8", "p1-9"]
    assert values("partition=0&offset=2&limit=3") == ["p0-2", "p0-3", "p0-4"]
    # The newest records of every partition, in time order.
    assert values("limit=3") == ["p1-8", "p0-9", "p1-9"]
    # From a time on, across partitions: 1_008_000 ms is p0-8's timestamp.
    assert values("timestamp=1008000") == ["p0-8", "p1-8", "p0-9", "p1-9"]
    assert values("partition=1&timestamp=1970-01-01T00:16:48") == ["p1-8", "p1-9"]
    assert values("timestamp=2100-01-01T00:00:00Z") == []


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("/topics/no-such-topic", 404, "topic 'no-such-topic': UNKNOWN_TOPIC_OR_PART"),
        ("/topics/no-such-topic/messages", 404, "UNKNOWN_TOPIC_OR_PART"),
        (
            "/topics/seeking/messages?partition=9",
            404,
            "topic 'seeking' has no partition 9 (it has 2)",
        ),
        ("/topics/seeking/messages?offset=abc", 400, "offset must be a whole number, not 'abc'"),
        (
            "/topics/seeking/messages?timestamp=yesterday",
            400,
            "neither milliseconds nor an ISO 8601",
        ),
        ("/topics/seeking/messages?offset=1&timestamp=5", 400, "seek by offset or by timestamp"),
        (
            "/topics/seeking/messages?offset=99999999999999999999",
            400,
            "offset 99999999999999999999 is out of range",
        ),
        ("/topics/seeking/messages?timestamp=-5", 400, "timestamp '-5' is before 1970"),
        (
            "/topics/seeking/messages?timestamp=99999999999999999999",
            400,
            "timestamp 99999999999999999999 is out of range",
        ),
        ("/groups/no-such-group", 404, "consumer group 'no-such-group' does not exist"),
        ("/no/such/page", 404, "Not Found"),
    ],
)
def test_bad_requests_get_a_page_that_says_why(console, query, status, message):
    page = fetch(console.url + query)
    assert page.status == status
    assert message in error_of(page.body)
    assert "Traceback" not in page.body


def test_unknown_topic_pages_do_not_create_it(console, admin):
    """A Metadata request naming a topic creates it on a broker with auto.create.topics.enable;
    the console asks with DescribeTopics, which never does."""
    fetch(console.url + "/topics/never-created")
    fetch(console.url + "/topics/never-created/messages")
    assert "never-created" not in admin.list_topics(timeout=30).topics


def test_an_offset_past_the_end_is_a_note_not_a_failure(console):
    page = fetch(console.url + "/topics/seeking/messages?partition=0&offset=99999999999999")
    assert page.status == 200
    assert "partition 0: offset 99999999999999 is at or past its end offset 10" in page.body
    assert rows(page.body, "messages") == [["No messages in this range."]]


def test_produce_form_writes_a_record_with_key_and_headers(console, admin, odradek_broker):
    create(admin, "produced", partitions=3)
    page = fetch(
        console.url + "/topics/produced/produce",
        {"partition": "2", "key": "k1", "value": "from the form", "headers": "a=1\nb=2"},
    )
    assert page.status == 200
    assert "Message produced to partition 2 at offset 0." in page.body
    consumer = Consumer(
        {"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "check"}
    )
    try:
        consumer.assign([TopicPartition("produced", 2, 0)])
        record = consumer.poll(30)
        assert record is not None and record.error() is None
        assert (record.key(), record.value()) == (b"k1", b"from the form")
        assert record.headers() == [("a", b"1"), ("b", b"2")]
    finally:
        consumer.close()
    missing = fetch(console.url + "/topics/nowhere/produce", {"value": "x"})
    assert missing.status == 404
    huge = fetch(console.url + "/topics/produced/produce", {"partition": "4294967296"})
    assert huge.status == 400
    assert error_of(huge.body) == "partition 4294967296 is out of range (at most 2147483647)"


def test_group_page_shows_lag_per_partition_and_in_total(console, admin, producer, odradek_broker):
    create(admin, "lagging", partitions=2)
    for i in range(10):
        producer.produce("lagging", value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": odradek_broker.bootstrap_servers, "group.id": "laggard"}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition("lagging", 0, 1), TopicPartition("lagging", 1, 4)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    listing = fetch(console.url + "/groups")
    assert ["laggard", "classic", "Empty"] in rows(listing.body, "groups")
    page = fetch(console.url + "/groups/laggard")
    assert page.status == 200
    assert rows(page.body, "lag") == [
        ["lagging", "0", "1", "5", "4", "-"],
        ["lagging", "1", "4", "5", "1", "-"],
    ]
    assert '<td id="total-lag" class="num">5</td>' in page.body


def test_a_form_posted_from_another_site_is_refused(console, admin):
    create(admin, "guarded", partitions=1)
    page = fetch(
        console.url + "/topics/guarded/delete", {}, headers={"Origin": "http://evil.example"}
    )
    assert page.status == 403
    assert error_of(page.body) == "a form posted from http://evil.example is refused"
    assert "guarded" in admin.list_topics(timeout=30).topics
    # The console's own pages post with its own origin.
    own = fetch(console.url + "/topics/guarded/delete", {}, headers={"Origin": console.url})
    assert own.status == 200
    assert "guarded" not in admin.list_topics(timeout=30).topics


def test_a_broker_that_is_down_is_a_502_page():
    process = ConsoleProcess(f"127.0.0.1:{free_port()}", "--timeout-ms", "1500")
    try:
        for path in ("/", "/topics", "/topics/t", "/groups"):
            page = fetch(process.url + path)
            assert page.status == 502, path
            assert "no answer from the cluster at 127.0.0.1:" in error_of(page.body)
        stream = EventStream(process.url + "/topics/t/live")
        try:
            failure = stream.next()
        finally:
            stream.close()
        assert failure.name == "failure" and failure.data["status"] == 502
        assert "no answer from the cluster at 127.0.0.1:" in failure.data["message"]
    finally:
        assert process.stop() == 0


def values_of(events: list) -> list[str]:
    return [r["value"]["text"] for e in events for r in e.data]


def test_live_tail_streams_what_arrives_in_the_chosen_partition(console, admin, producer):
    create(admin, "live-http", partitions=2)
    for i in range(3):
        producer.produce("live-http", value=b"old-%d" % i, partition=1)
    assert producer.flush(30) == 0
    stream = EventStream(console.url + "/topics/live-http/live?partition=1")
    try:
        ready = stream.next()
        # From the end: the three old records are not shown.
        assert (ready.name, ready.data) == ("ready", {"positions": {"1": 3}})
        assert ready.id == "1:3"  # where a reconnecting page goes on from, records or not
        producer.produce("live-http", value=b"elsewhere", partition=0)
        producer.produce("live-http", key=b"k", value=b"new-1", partition=1, headers=[("h", b"v")])
        producer.produce("live-http", value=b"\xff\x00", partition=1)
        assert producer.flush(30) == 0
        events = [stream.next()]
        while sum(len(e.data) for e in events) < 2:
            events.append(stream.next())
    finally:
        stream.close()
    records = [r for e in events for r in e.data]
    assert [(r["partition"], r["offset"]) for r in records] == [(1, 3), (1, 4)]
    assert records[0]["key"] == {"kind": "text", "text": "k", "size": 1, "truncated": False}
    assert records[0]["value"]["text"] == "new-1"
    assert records[0]["headers"] == [
        ["h", {"kind": "text", "text": "v", "size": 1, "truncated": False}]
    ]
    assert records[1]["value"] == {
        "kind": "hex",
        "text": "00000000  ff 00",
        "size": 2,
        "truncated": False,
    }
    assert records[0]["timestamp_type"] == "CreateTime"
    # Each batch names where the next one starts: what a reconnecting page sends back.
    assert events[-1].id == "1:5"

    # A reconnecting EventSource sends the last id it got; a resumed page passes "from".
    for headers, query, expected in [
        ({"Last-Event-ID": "1:3"}, "", ["new-1", ""]),
        ({}, "&from=1:4", [""]),
    ]:
        stream = EventStream(console.url + "/topics/live-http/live?partition=1" + query, headers)
        try:
            assert stream.next().name == "ready"
            got = [stream.next()]
            while sum(len(e.data) for e in got) < len(expected):
                got.append(stream.next())
        finally:
            stream.close()
        assert [
            r["value"]["text"] if r["value"]["kind"] == "text" else "" for e in got for r in e.data
        ] == expected


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/topics/no-such-live-topic/live", 404, "UNKNOWN_TOPIC_OR_PART"),
        ("/topics/seeking/live?partition=9", 404, "topic 'seeking' has no partition 9 (it has 2)"),
        ("/topics/seeking/live?partition=x", 400, "partition must be a whole number, not 'x'"),
        ("/topics/seeking/live?from=0-5", 400, "live tail position '0-5' is not partition:offset"),
        ("/topics/seeking/live?from=0:99999999999999999999", 400, "out of range"),
        ("/topics/wide/live", 400, "topic 'wide' has 150 partitions: choose one to browse"),
    ],
)
def test_a_live_tail_that_cannot_start_says_why(console, admin, path, status, message):
    stream = EventStream(console.url + path)
    try:
        failure = stream.next()
    finally:
        stream.close()
    assert failure.name == "failure"
    assert failure.data["status"] == status
    assert message in failure.data["message"]
    assert "no-such-live-topic" not in admin.list_topics(timeout=30).topics
