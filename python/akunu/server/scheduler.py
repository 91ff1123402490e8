"""The scheduler of one served model: a worker thread that owns the akunu.Model and runs the
requests queued for it, one generation at a time, in arrival order.

The HTTP side (asyncio) submits a Job and reads its events; the worker runs the Job's work
function with the model, which emits events (text deltas, the end of a choice) back to the event
loop thread-safely. A Job that is cancelled (its client disconnected) is skipped if still waiting,
and its work function stops at its next check (between chunks of tokens) if running.

Why one thread per model: akunu.Model runs one generation session at a time, and the engine
releases the GIL while it computes, so the event loop keeps serving other requests. A later
batched decoder replaces _run's one-job loop with one that takes several jobs from the queue and
steps their sequences together; Job and submit() stay as they are."""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from typing import Any, Callable, Optional

from ..model import Model
from .config import ModelSpec


class QueueFull(Exception):
    def __init__(self, model: str, waiting: int, retry_after: int):
        super().__init__(f"model {model!r} has {waiting} requests waiting, the most this server queues; "
                         f"retry in {retry_after} s")
        self.retry_after = retry_after


class Job:
    """One request's work on the model. Events are (kind, payload) tuples; the last is ("done", None)."""

    def __init__(self, work: Callable[[Model, "Job"], None], loop: asyncio.AbstractEventLoop):
        self.work = work
        self._loop = loop
        self.events: asyncio.Queue = asyncio.Queue()
        self.cancelled = threading.Event()
        self.submitted_at = time.monotonic()
        self.started_at: Optional[float] = None

    def emit(self, kind: str, payload: Any = None) -> None:
        """Called on the worker thread."""
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, payload))
        except RuntimeError:  # the event loop has closed (server shutdown): nobody is listening
            self.cancelled.set()

    def cancel(self) -> None:
        self.cancelled.set()


class ModelWorker:
    """The served model `spec` and its request queue (at most `max_queue` waiting)."""

    def __init__(self, spec: ModelSpec, max_queue: int, model: Optional[Model] = None):
        self.spec = spec
        self.max_queue = max_queue
        self.model = model
        self.last_used = time.monotonic()
        self.busy = False
        self._queue: "queue.Queue[Optional[Job]]" = queue.Queue()
        self._waiting = 0
        self._lock = threading.Lock()
        self._service_seconds = 1.0  # a running mean of how long a job takes, for Retry-After
        self._thread = threading.Thread(target=self._run, name=f"akunu-serve-{spec.name}", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        return self._waiting

    @property
    def loaded(self) -> bool:
        return self.model is not None

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._waiting >= self.max_queue:
                retry = max(1, math.ceil(self._service_seconds * (self._waiting + 1)))
                raise QueueFull(self.spec.name, self._waiting, retry)
            self._waiting += 1
        self._queue.put(job)

    def unload_if_idle(self, idle_seconds: float) -> bool:
        """Frees the model if nothing ran or waited for `idle_seconds` (the next request reloads
        it). Runs on the caller's thread but only while the worker is idle, under the lock."""
        with self._lock:
            if self.model is None or self.busy or self._waiting or time.monotonic() - self.last_used < idle_seconds:
                return False
            model, self.model = self.model, None
        model.close()
        return True

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)
        if self.model is not None:
            self.model.close()
            self.model = None

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            with self._lock:
                self._waiting -= 1
                self.busy = not job.cancelled.is_set()
            if not self.busy:  # its client left while it waited
                job.emit("done")
                continue
            job.started_at = time.monotonic()
            try:
                if self.model is None:  # unloaded while idle: load again
                    self.model = Model(self.spec.path, **self.spec.load_options())
                job.work(self.model, job)
            except BaseException as e:  # handed to the request, which answers with an error
                job.emit("error", e)
            finally:
                elapsed = time.monotonic() - job.started_at
                self._service_seconds = 0.8 * self._service_seconds + 0.2 * elapsed
                with self._lock:
                    self.busy = False
                    self.last_used = time.monotonic()
                job.emit("done")
