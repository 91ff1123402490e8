"""What `akunu serve` serves and how: the models (ModelSpec) and the server's limits (ServerConfig).
Both come from the command line or a small JSON config file (load_config_file)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from typing import Optional

LOAD_OPTIONS = ("backend", "context_length", "threads", "kv_cache_dtype", "chat_template")


@dataclass(frozen=True)
class ModelSpec:
    """One served model: `name` is what requests put in "model"; the rest goes to akunu.Model()."""

    name: str
    path: str
    backend: str = "auto"
    context_length: Optional[int] = None
    threads: Optional[int] = None
    kv_cache_dtype: str = "f16"
    chat_template: Optional[str] = None

    @classmethod
    def from_argument(cls, text: str, **load_options) -> "ModelSpec":
        """`-m PATH` (named after the file, without .gguf) or `-m NAME=PATH`."""
        name, sep, path = text.partition("=")
        if not sep or os.path.exists(text):
            name, path = default_model_name(text), text
        if not name:
            raise ValueError(f"-m {text!r}: the model name before '=' is empty")
        return cls(name=name, path=path, **load_options)

    def load_options(self) -> dict:
        return {k: getattr(self, k) for k in LOAD_OPTIONS}


def default_model_name(path: str) -> str:
    base = os.path.basename(os.path.normpath(path))
    return base[:-5] if base.lower().endswith(".gguf") else base


@dataclass
class ServerConfig:
    """The server's settings. Defaults are safe for a laptop: loopback only, no key, bounded queue."""

    models: list[ModelSpec] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8080
    api_key: Optional[str] = None        # when set, every route but /health and the chat page needs it
    max_queue: int = 16                  # waiting requests per model; more get 429 with Retry-After
    max_body_bytes: int = 4 * 1024 * 1024
    max_tokens_limit: int = 4096         # the largest max_tokens a request may ask for
    default_max_tokens: int = 1024       # chat completions without max_tokens (still capped by the context)
    idle_unload_seconds: float = 0       # unload a model unused this long (0: never); reloaded on demand

    def __post_init__(self):
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"two served models share the name {duplicates[0]!r}; name them with -m NAME=PATH")
        for name in ("max_queue", "max_body_bytes", "max_tokens_limit", "default_max_tokens"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.idle_unload_seconds < 0:
            raise ValueError(f"idle_unload_seconds must be >= 0, got {self.idle_unload_seconds!r}")


def load_config_file(path: str) -> ServerConfig:
    """A JSON file: {"models": [{"name": ..., "path": ..., "backend": ..., ...}], "port": 8080, ...}
    with ServerConfig's and ModelSpec's field names; unknown keys are an error naming them."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    server_keys = {f.name for f in fields(ServerConfig)}
    model_keys = {f.name for f in fields(ModelSpec)}
    unknown = sorted(set(data) - server_keys)
    if unknown:
        raise ValueError(f"{path}: unknown setting(s) {unknown}; known: {sorted(server_keys)}")
    models = []
    for i, m in enumerate(data.get("models", [])):
        if not isinstance(m, dict) or "path" not in m:
            raise ValueError(f"{path}: models[{i}] must be an object with at least a \"path\"")
        unknown = sorted(set(m) - model_keys)
        if unknown:
            raise ValueError(f"{path}: models[{i}] has unknown key(s) {unknown}; known: {sorted(model_keys)}")
        m = {"name": default_model_name(m["path"]), **m}
        m["path"] = os.path.join(os.path.dirname(os.path.abspath(path)), m["path"])  # relative to the file
        models.append(ModelSpec(**m))
    return ServerConfig(**{**data, "models": models})
