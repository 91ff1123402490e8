"""GET /metrics: Prometheus counters and histograms of the server (prometheus-client, one registry
per app so several apps in one process, as in the tests, do not share counts)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
disable_created_metrics()  # the *_created series only double the page
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class ServerMetrics:
    def __init__(self, registry_of_models):
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("akunu_requests", "HTTP requests answered", ["route", "status"], registry=r)
        self.prompt_tokens = Counter("akunu_prompt_tokens", "Prompt tokens of finished generations", ["model"],
                                     registry=r)
        self.cached_tokens = Counter("akunu_cached_prompt_tokens", "Prompt tokens reused from the KV cache",
                                     ["model"], registry=r)
        self.completion_tokens = Counter("akunu_completion_tokens", "Generated tokens", ["model"], registry=r)
        self.latency = Histogram("akunu_request_seconds", "Time from request to last byte of generation requests",
                                 ["model", "route"], buckets=_SECONDS, registry=r)
        self.first_token = Histogram("akunu_time_to_first_token_seconds", "Time from request to first text",
                                     ["model"], buckets=_SECONDS, registry=r)
        self.rejected = Counter("akunu_queue_rejections", "Requests refused with 429 because the queue was full",
                                ["model"], registry=r)
        waiting = Gauge("akunu_queue_waiting", "Requests waiting for their model", ["model"], registry=r)
        loaded = Gauge("akunu_model_loaded", "1 if the model is in memory", ["model"], registry=r)
        # Read at scrape time from the schedulers, so they never go stale.
        self._models = registry_of_models
        self._waiting, self._loaded = waiting, loaded

    def render(self) -> bytes:
        for name, worker in self._models.workers.items():
            self._waiting.labels(name).set(worker.waiting)
            self._loaded.labels(name).set(1 if worker.loaded else 0)
        return generate_latest(self.registry)
