"""A live `akunu serve` app on a loopback port for tests and benchmarks: uvicorn in a thread,
clients talk real HTTP (the openai package, httpx, a browser)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Iterator, Optional

import uvicorn

from akunu.server import ModelSpec, ServerConfig, create_app


class RunningServer:
    def __init__(self, url: str, app, server: uvicorn.Server):
        self.url, self.app, self.server = url, app, server

    @property
    def v1(self) -> str:
        return self.url + "/v1"

    def openai(self, api_key: str = "unused", **kw):
        import openai

        return openai.OpenAI(base_url=self.v1, api_key=api_key, max_retries=0, **kw)

    def worker(self, name: str):
        return self.app.state.registry.workers[name]


@contextlib.contextmanager
def running_server(config: ServerConfig, models: Optional[dict] = None) -> Iterator[RunningServer]:
    """Serves `config` (its already loaded `models` by name reused) until the block ends."""
    app = create_app(config, models)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", app, server)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def smollm2_config(path, name: str = "smollm2", **settings) -> ServerConfig:
    return ServerConfig(models=[ModelSpec(name, str(path), backend="cpu")], **settings)
