"""Progress from a step in the worker to its caller: :func:`report` in the child, one
:class:`ProgressEvent` per report in the parent.

Examples
--------
>>> ProgressEvent("simplify", 0.5, "folding constants", 1.0).message
'folding constants'
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from multiprocessing.connection import Connection

__all__ = ["ProgressEvent", "report"]


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """One progress report from a step running in a worker.

    Attributes
    ----------
    step : str
        The step that reported.
    fraction : float or None
        Share done, from 0 to 1, when the step knows it.
    message : str or None
        What the step is doing.
    elapsed : float
        Seconds since the call was sent to the worker.

    Examples
    --------
    >>> from explorer.isolation.worker import ProgressEvent
    >>> ProgressEvent("simplify", 0.5, "folding constants", 1.25).fraction
    0.5
    """

    step: str
    fraction: float | None
    message: str | None
    elapsed: float


class _Channel:
    """The child's end of the pipe, shared by :func:`report` and the serving loop."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.call_id = 0

    def send(self, message: tuple) -> None:
        with self.lock:
            self.conn.send(message)


_CHANNEL: _Channel | None = None


def report(progress: float | str | None = None, message: str | None = None) -> None:
    """Report progress from inside a step; the parent's ``progress`` callback receives it.

    Outside a worker (a step called directly) this does nothing, so steps may always call it.

    Parameters
    ----------
    progress : float or str, optional
        Share done (0 to 1), or a message when given a string.
    message : str, optional
        What the step is doing.

    Examples
    --------
    >>> from explorer.isolation import worker
    >>> worker.report(0.5, "half way")  # no-op outside a worker
    """
    if isinstance(progress, str) and message is None:
        progress, message = None, progress
    channel = _CHANNEL
    if channel is None:
        return
    fraction = None if progress is None else float(progress)
    with contextlib.suppress(OSError, ValueError):  # the parent is gone: nothing to report to
        channel.send(("progress", channel.call_id, fraction, message))
