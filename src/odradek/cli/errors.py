"""How the command-line tools fail: one line on stderr and an exit status, never a traceback.

This module imports nothing but the standard library, so `odradek serve` (which must not
load a client library) shares the same handling as the client tools.
"""

from __future__ import annotations

import os
import signal
import sys


class ToolError(Exception):
    """A failure a tool reports as ``Error: <message>`` with exit status 1.

    Raised for what an operator can act on: no broker reachable, an unknown topic, group or
    broker id, a broker's error answer, a wait that ran out.
    """


def stdout_closed() -> int:
    """The reader of our output went away (``odradek consume ... | head``).

    Unix tools are killed by SIGPIPE there, silently, with status 128 + SIGPIPE; a tool ends
    the same way once its clients are closed (in ``finally`` blocks, so a consumer leaves its
    group). stdout is pointed at /dev/null first, since the interpreter flushes it again at
    exit and would report a second BrokenPipeError.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE
