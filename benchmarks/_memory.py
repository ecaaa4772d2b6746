"""Peak resident memory of a process tree (this process and every process it starts), sampled.

`ru_maxrss` covers one process; a prepare step with worker processes needs the sum over the tree at the same
moment. The sampler reads it every `interval` seconds in a thread (psutil), so a peak shorter than the interval
can be missed: the figure is a lower bound on the true peak, close to it when images take longer than that.
"""
from __future__ import annotations

import threading

import psutil


class TreePeakRSS:
    def __init__(self, interval: float = 0.05):
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> int:
        root = psutil.Process()
        total = 0
        for proc in [root, *root.children(recursive=True)]:
            try:
                total += proc.memory_info().rss
            except psutil.Error:                 # a worker that just ended
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_bytes = max(self.peak_bytes, self._sample())
            self._stop.wait(self.interval)

    def __enter__(self) -> 'TreePeakRSS':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_bytes = max(self.peak_bytes, self._sample())

    @property
    def peak_gb(self) -> float:
        return self.peak_bytes / 2 ** 30
