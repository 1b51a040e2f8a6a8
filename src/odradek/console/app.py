"""The console's web application: aiohttp routes that render Jinja2 pages.

Why aiohttp: it is an asyncio server and client in one package with no ASGI server beside it
(starlette needs uvicorn), it serves the static files itself and streams a response (the
live tail's Server-Sent Events), and its test tooling is not needed because the tests drive
a real process. Jinja2 renders on the server with autoescaping, so no page needs a build
step or a script fetched from the network; the one JavaScript file asks before a delete,
refreshes a group's page and runs the message browser's live tail.

Two things run beside the pages: live tails (``live.py``), each polling its consumer in a
thread pool of their own so that open tails never hold up the pages' calls, at most
``MAX_LIVE_TAILS`` at once; and the lag sampler, which every ``lag_interval_s`` samples the
total lag of the groups viewed lately into the ``LagHistory`` the group page charts.

Every client call blocks (librdkafka waits for the broker), so each one runs in a thread
(``asyncio.to_thread``) and the loop keeps serving other pages. A failure is a page with
one sentence and an HTTP status: ``ConsoleError`` from the client calls, a form value that
is not a number, an unknown path, a form posted from another site; an unexpected exception
is logged and shown as a 500 page, never as a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from aiohttp import web

from odradek.console import live
from odradek.console.api_versions import broker_versions
from odradek.console.cluster import MAX_MESSAGES, Cluster
from odradek.console.errors import ConsoleError
from odradek.console.fields import parse_pairs, parse_timestamp, whole_number
from odradek.console.lag_chart import layout
from odradek.console.lag_history import LagHistory
from odradek.console.paging import (
    PARTITIONS_PER_PAGE,
    TOPICS_PER_PAGE,
    page_number,
    paginate,
    search,
)
from odradek.console.payload import format_ms

log = logging.getLogger(__name__)

HERE = Path(__file__).parent

#: Records the message browser shows unless the form asks for another number.
DEFAULT_MESSAGES = 50
#: Live tails open at once; each holds a consumer and, while polling, a thread.
MAX_LIVE_TAILS = 16
#: Seconds between two writes to a live tail's stream (a comment when nothing arrived), so
#: that proxies keep it open and a closed page is noticed.
KEEPALIVE_S = 15.0
#: Default seconds between two samples of a viewed group's lag.
LAG_INTERVAL_S = 10.0


@dataclass
class Background:
    """What runs beside the pages: live tails and the lag sampler."""

    lag_interval_s: float
    lag_history: LagHistory = field(default_factory=LagHistory)
    live_pool: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(MAX_LIVE_TAILS, "live-tail")
    )
    live_tails: int = 0
    #: Set when the console stops: every live tail ends its stream.
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    sampler: asyncio.Task[None] | None = None


CLUSTER: web.AppKey[Cluster] = web.AppKey("cluster", Cluster)
TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("templates", jinja2.Environment)
BACKGROUND: web.AppKey[Background] = web.AppKey("background", Background)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["ms"] = format_ms
    env.globals["urlencode"] = urlencode
    return env


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    html = request.app[TEMPLATES].get_template(template).render(request=request, **context)
    return web.Response(text=html, status=status, content_type="text/html")


async def call(request: web.Request, method: Callable[..., Any], *args: Any) -> Any:
    """A blocking ``Cluster`` method, run in a thread."""
    return await asyncio.to_thread(method, *args)


# -- pages -----------------------------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    cluster = request.app[CLUSTER]
    info = await call(request, cluster.overview)
    versions = await broker_versions(
        ((b.node_id, b.host, b.port) for b in info.brokers), cluster.config, cluster.timeout_s
    )
    return render(
        request,
        "overview.html",
        overview=info,
        versions=versions,
        bootstrap=cluster.bootstrap_servers,
    )


async def topics(request: web.Request) -> web.Response:
    query = request.query.get("q", "")
    show_internal = request.query.get("internal") == "1"
    summaries = await call(request, request.app[CLUSTER].topics)
    by_name = {t.name: t for t in summaries if show_internal or not t.internal}
    names = search(list(by_name), query)
    page = paginate(names, page_number(request.query.get("page")), TOPICS_PER_PAGE)
    return render(
        request,
        "topics.html",
        page=page,
        topics=[by_name[n] for n in page.items],
        q=query,
        internal=show_internal,
    )


async def create_topic(request: web.Request) -> web.Response:
    form = await request.post()
    name = str(form.get("name", "")).strip()
    if not name:
        raise ConsoleError("a topic needs a name")
    partitions = whole_number(str(form.get("partitions", "")), "partitions", -1, bits=32)
    replication = whole_number(
        str(form.get("replication_factor", "")), "replication factor", -1, bits=16
    )
    configs = dict(parse_pairs(str(form.get("configs", "")), "configs"))
    await call(request, request.app[CLUSTER].create_topic, name, partitions, replication, configs)
    raise web.HTTPSeeOther(f"/topics/{_quote(name)}?created=1")


async def topic(request: web.Request) -> web.Response:
    cluster = request.app[CLUSTER]
    name = request.match_info["name"]
    # The partitions first: an unknown topic is then always described as the topic, not as
    # its configs (and the configs take a millisecond, so nothing is gained in parallel).
    number = page_number(request.query.get("page"))
    page = await call(request, cluster.partition_page, name, number, PARTITIONS_PER_PAGE)
    configs = await call(request, cluster.topic_configs, name)
    return render(
        request,
        "topic.html",
        name=name,
        page=page,
        partitions=page.items,
        configs=configs,
        created=request.query.get("created") == "1",
    )


async def delete_topic(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await call(request, request.app[CLUSTER].delete_topic, name)
    raise web.HTTPSeeOther("/topics?" + urlencode({"deleted": name}))


async def add_partitions(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    form = await request.post()
    total = whole_number(str(form.get("total", "")), "the new partition count", bits=32)
    if total is None:
        raise ConsoleError("give the new total number of partitions")
    await call(request, request.app[CLUSTER].add_partitions, name, total)
    raise web.HTTPSeeOther(f"/topics/{_quote(name)}")


async def messages(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    q = request.query
    partition = whole_number(q.get("partition"), "partition", bits=32)
    offset = whole_number(q.get("offset"), "offset")
    raw_time = q.get("timestamp", "").strip()
    timestamp_ms = parse_timestamp(raw_time) if raw_time else None
    limit = whole_number(q.get("limit"), "limit", DEFAULT_MESSAGES) or DEFAULT_MESSAGES
    if offset is not None and timestamp_ms is not None:
        raise ConsoleError("seek by offset or by timestamp, not both")
    browse = await call(
        request, request.app[CLUSTER].browse, name, partition, offset, timestamp_ms, limit
    )
    return render(
        request,
        "messages.html",
        name=name,
        browse=browse,
        partition=q.get("partition", ""),
        offset=q.get("offset", ""),
        timestamp=raw_time,
        limit=min(max(limit, 1), MAX_MESSAGES),
        produced=q.get("produced") == "1",
    )


async def produce(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    form = await request.post()
    partition = whole_number(str(form.get("partition", "")), "partition", bits=32)
    key = str(form.get("key", ""))
    headers = parse_pairs(str(form.get("headers", "")), "headers")
    p, offset = await call(
        request,
        request.app[CLUSTER].produce,
        name,
        partition,
        key.encode() if key else None,
        str(form.get("value", "")).encode(),
        [(h, v.encode()) for h, v in headers],
    )
    query = urlencode({"partition": p, "offset": offset, "produced": 1})
    raise web.HTTPSeeOther(f"/topics/{_quote(name)}/messages?{query}")


async def groups(request: web.Request) -> web.Response:
    summaries = await call(request, request.app[CLUSTER].groups)
    page = paginate(summaries, page_number(request.query.get("page")), TOPICS_PER_PAGE)
    return render(request, "groups.html", page=page)


async def group(request: web.Request) -> web.Response:
    detail = await call(request, request.app[CLUSTER].group, request.match_info["group"])
    history = request.app[BACKGROUND].lag_history
    now_ms = _now_ms()
    history.viewed(detail.group_id, now_ms, detail.total_lag)
    chart = layout(history.points(detail.group_id, now_ms), now_ms, history.window_ms)
    return render(request, "group.html", group=detail, chart=chart)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def sample_lag(cluster: Cluster, background: Background) -> None:
    """Every ``lag_interval_s``, each lately viewed group's total lag into the history.

    A group whose lag cannot be read this time (the cluster does not answer, the group is
    gone) gets no sample: its chart shows the gap rather than a made-up value.
    """
    history = background.lag_history
    while True:
        await asyncio.sleep(background.lag_interval_s)
        for group_id in history.due(_now_ms()):
            try:
                lag = await asyncio.to_thread(cluster.group_total_lag, group_id)
            except ConsoleError as exc:
                log.debug("lag of group %s not sampled: %s", group_id, exc.message)
                continue
            history.record(group_id, _now_ms(), lag)


# -- live tail ---------------------------------------------------------------------------


async def live_tail(request: web.Request) -> web.StreamResponse:
    """``/topics/NAME/live``: the live tail's event stream (see ``live.py``).

    Every answer is a stream, failures included (as a ``failure`` event), because the
    browser's EventSource shows a page nothing of an HTTP error.
    """
    background = request.app[BACKGROUND]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    pool = background.live_pool
    tail: live.LiveTail | None = None
    counted = False
    try:
        if background.live_tails >= MAX_LIVE_TAILS:
            raise ConsoleError(f"{MAX_LIVE_TAILS} live tails are open already; close one", 503)
        background.live_tails += 1
        counted = True
        q = request.query
        partition = whole_number(q.get("partition"), "partition", bits=32)
        # A reconnecting EventSource names the last batch it got: newer than its URL's "from".
        resume = live.parse_positions(request.headers.get("Last-Event-ID") or q.get("from", ""))
        cluster = request.app[CLUSTER]
        name = request.match_info["name"]
        tail = await loop.run_in_executor(pool, cluster.live_tail, name, partition, resume)
        start = live.format_positions(tail.positions)
        await response.write(live.event({"positions": tail.positions}, "ready", start))
        written = loop.time()
        notice = None
        while not background.stopping.is_set() and not _gone(request):
            step = await loop.run_in_executor(pool, tail.poll)
            if step.messages:
                records = [live.record_data(m) for m in step.messages]
                position = live.format_positions(tail.positions)
                await response.write(live.event(records, event_id=position))
                written = loop.time()
            for text in step.notices:
                if text != notice:
                    await response.write(live.event({"message": text}, "notice"))
                    notice, written = text, loop.time()
            if loop.time() - written >= KEEPALIVE_S:
                await response.write(b": keep-alive\n\n")
                written = loop.time()
    except ConsoleError as exc:
        await _fail(response, exc.message, exc.status)
    except ConnectionResetError:  # the page went away while we wrote
        pass
    except Exception:
        log.exception("live tail %s failed", request.path)
        await _fail(
            response,
            "the console failed to go on with this live tail; its log has the details",
            500,
        )
    finally:
        if counted:
            background.live_tails -= 1
        if tail is not None:
            await loop.run_in_executor(pool, tail.close)
    return response


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _fail(response: web.StreamResponse, message: str, status: int) -> None:
    try:
        await response.write(live.event({"message": message, "status": status}, "failure"))
    except ConnectionResetError:
        pass


def _quote(name: str) -> str:
    return quote(name, safe="")


# -- failures --------------------------------------------------------------------------------


@web.middleware
async def error_pages(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as a page with one sentence: what went wrong, never how the code failed."""
    try:
        return await handler(request)
    except ConsoleError as exc:
        return render(request, "error.html", status=exc.status, message=exc.message)
    except web.HTTPRedirection:
        raise
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return render(request, "error.html", status=exc.status, message=exc.reason)
    except Exception:
        log.exception("console page %s failed", request.path)
        return render(
            request,
            "error.html",
            status=500,
            message="the console failed to build this page; its log has the details",
        )


@web.middleware
async def same_origin_forms(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a form posted from another site's page (cross-site request forgery).

    The console has no login: any page a user's browser opens could otherwise post a form
    to it, and delete a topic. Browsers name the posting page's origin in ``Origin`` on
    every cross-origin POST; a form of the console's own pages names the console itself.
    """
    if request.method == "POST":
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            raise ConsoleError(f"a form posted from {origin} is refused", 403)
    return await handler(request)


def make_app(cluster: Cluster, lag_interval_s: float = LAG_INTERVAL_S) -> web.Application:
    app = web.Application(middlewares=[error_pages, same_origin_forms])
    app[CLUSTER] = cluster
    app[TEMPLATES] = _environment()
    background = app[BACKGROUND] = Background(lag_interval_s)

    async def start_sampler(_app: web.Application) -> None:
        background.sampler = asyncio.create_task(sample_lag(cluster, background))

    async def stop_background(_app: web.Application) -> None:
        background.stopping.set()
        if background.sampler is not None:
            background.sampler.cancel()

    async def close_pool(_app: web.Application) -> None:
        background.live_pool.shutdown(wait=False)

    app.on_startup.append(start_sampler)
    app.on_shutdown.append(stop_background)
    app.on_cleanup.append(close_pool)
    app.add_routes(
        [
            web.get("/", overview),
            web.get("/topics", topics),
            web.post("/topics", create_topic),
            web.get("/topics/{name}", topic),
            web.post("/topics/{name}/delete", delete_topic),
            web.post("/topics/{name}/partitions", add_partitions),
            web.get("/topics/{name}/messages", messages),
            web.get("/topics/{name}/live", live_tail),
            web.post("/topics/{name}/produce", produce),
            web.get("/groups", groups),
            web.get("/groups/{group}", group),
            web.static("/static", HERE / "static"),
        ]
    )
    return app


async def serve(
    cluster: Cluster,
    host: str,
    port: int,
    ready: Callable[[str], None],
    lag_interval_s: float = LAG_INTERVAL_S,
) -> None:
    """Serve until cancelled; ``ready`` gets the URL once the port is bound (``port`` may be 0)."""
    runner = web.AppRunner(make_app(cluster, lag_interval_s), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        url_host = f"[{bound_host}]" if ":" in bound_host else bound_host
        ready(f"http://{url_host}:{bound_port}/")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
