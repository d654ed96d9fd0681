"""One concurrency budget for the whole endpoint, shared by WebSocket sessions and HTTP requests.

Why shared: the engine is one CPU-bound resource. With a cap on sessions alone, a client could send forty
concurrent POSTs and take all of it while WebSocket users were turned away. Each open session and each POST
being answered holds one slot; a handshake or POST that finds every slot taken is refused at once with 503 and
Retry-After (see access.too_many_sessions_response), before any work is queued for it.

All counting happens on the event loop without an await between the check and the increment, so concurrent
arrivals cannot overshoot the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["session", "request"]


@dataclass
class Admission:
    """Slots in use per kind, and how many arrivals were refused, against one `limit`."""

    limit: int
    sessions: int = 0
    requests: int = 0
    refused_sessions: int = 0
    refused_requests: int = 0

    @property
    def in_use(self) -> int:
        return self.sessions + self.requests

    def try_enter(self, kind: Kind) -> bool:
        """Take a slot for a new session or request; False (and counted as refused) when none is free."""
        if self.in_use >= self.limit:
            if kind == "session":
                self.refused_sessions += 1
            else:
                self.refused_requests += 1
            return False
        if kind == "session":
            self.sessions += 1
        else:
            self.requests += 1
        return True

    def leave(self, kind: Kind) -> None:
        """Give back the slot `try_enter` took."""
        if kind == "session":
            self.sessions -= 1
        else:
            self.requests -= 1
