"""`odradek console`: a web console for any Kafka-compatible cluster.

The console is a Kafka client and nothing more: every page is built from the answers of
confluent-kafka's AdminClient, Consumer and Producer, so it works the same against Odradek
and Apache Kafka. It imports no broker module.

- ``payload.py``: how records and their bytes are shown (text, pretty JSON or hex), sans-I/O;
- ``paging.py``: search and pagination of long lists, sans-I/O;
- ``lag_history.py`` and ``lag_chart.py``: the sampled lag of viewed groups and its chart's
  geometry, sans-I/O;
- ``errors.py``: ``ConsoleError``, the one-sentence failure every page and stream reports;
- ``cluster.py``: the blocking client calls the pages need, with the errors a user reads;
- ``live.py``: the message browser's live tail (a held consumer, Server-Sent Events);
- ``app.py``: the aiohttp application, which runs those calls in threads off its loop;
- ``templates/`` and ``static/``: server-rendered Jinja2 pages and one small CSS and JS file.
"""
