"""SIGTERM and SIGHUP unwound like Ctrl-C while a build runs, so that staging folders
are removed and the running tool ends too (shared by the board and ASIC builds)."""

from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "signals_unwind"]


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwound like Ctrl-C, so that staging folders are removed
    and the running tool (``subprocess.run`` kills its child on any exception) ends too."""


@contextlib.contextmanager
def signals_unwind():
    """Turn SIGTERM and SIGHUP into ``Terminated`` for the duration of a build; Python's
    default would end qloom at once and leave Yosys or nextpnr running alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated(f"signal {signal.Signals(signum).name}")

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
