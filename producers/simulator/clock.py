"""Simulated time: as fast as possible (load, tests) or paced against the wall clock (demos).

Simulated time starts at 0; an event's timestamp is `epoch_ms + simulated ms`. A fast clock
starts at a fixed epoch, so a seeded run gives byte-identical events; a real-time clock starts
at the current wall time, so its events carry real timestamps.
"""

from __future__ import annotations

import time

DEFAULT_EPOCH_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z


class FastClock:
    """Never waits."""

    realtime = False

    def __init__(self, epoch_ms: int = DEFAULT_EPOCH_MS) -> None:
        self.epoch_ms = epoch_ms

    def wait_until(self, sim_ms: int) -> None:
        return None


class RealtimeClock:
    """Waits until the wall clock reaches the simulated time (`speed` x faster if asked)."""

    realtime = True

    def __init__(self, speed: float = 1.0, epoch_ms: int | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = speed
        self._wall_start = time.monotonic()
        self.epoch_ms = int(time.time() * 1000) if epoch_ms is None else epoch_ms

    def wait_until(self, sim_ms: int) -> None:
        delay = self._wall_start + sim_ms / 1000.0 / self.speed - time.monotonic()
        if delay > 0:
            time.sleep(delay)
