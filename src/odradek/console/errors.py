"""ConsoleError: a failure a page states in one sentence, with the HTTP status it is served with.

Its own module so that every part of the console (the client calls, the live tail, the web
application) raises the same error without importing each other.
"""

from __future__ import annotations


class ConsoleError(Exception):
    """A failure the page states in one sentence, with the HTTP status it is served with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
