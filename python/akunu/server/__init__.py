"""`akunu serve`: an OpenAI-compatible HTTP server over akunu models.

    from akunu.server import ServerConfig, ModelSpec, create_app, run_server
    run_server(ServerConfig(models=[ModelSpec("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")]))

or from a shell: `akunu serve -m SmolLM2-135M-Instruct.Q4_1.gguf --port 8080`, then any OpenAI
client with base_url="http://127.0.0.1:8080/v1". create_app() gives the ASGI app to run under
another server (uvicorn, hypercorn) or to test in-process."""

from __future__ import annotations

import logging
import sys

from .app import create_app
from .config import ModelSpec, ServerConfig, load_config_file

__all__ = ["create_app", "run_server", "ServerConfig", "ModelSpec", "load_config_file"]


def run_server(config: ServerConfig, log_level: str = "info") -> None:
    """Serves `config` until interrupted (Ctrl-C), logging one line per request to stderr."""
    import uvicorn

    if not config.models:
        raise ValueError("no models to serve: give at least one ModelSpec (akunu serve -m MODEL)")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log = logging.getLogger("akunu.server")
    log.addHandler(handler)
    log.setLevel(log_level.upper())
    app = create_app(config)
    uvicorn.run(app, host=config.host, port=config.port, log_level="warning", timeout_graceful_shutdown=5)
