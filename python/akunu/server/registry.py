"""The served models by name, each with its scheduler (ModelWorker)."""

from __future__ import annotations

from typing import Optional

from ..model import Model
from .config import ServerConfig
from .errors import APIError
from .scheduler import ModelWorker


class ModelRegistry:
    def __init__(self, config: ServerConfig, preloaded: Optional[dict[str, Model]] = None):
        """Loads every model of `config` now (so a bad path fails at startup, not at the first
        request), except those given already loaded in `preloaded` by name."""
        preloaded = preloaded or {}
        self.workers: dict[str, ModelWorker] = {}
        try:
            for spec in config.models:
                model = preloaded.get(spec.name) or Model(spec.path, **spec.load_options())
                self.workers[spec.name] = ModelWorker(spec, config.max_queue, model)
        except BaseException:
            self.close()
            raise

    def names(self) -> list[str]:
        return list(self.workers)

    def resolve(self, name: Optional[str]) -> ModelWorker:
        """The worker of model `name`: its exact name, else the one name equal ignoring case; None
        is allowed only when one model is served."""
        if name is None:
            if len(self.workers) == 1:
                return next(iter(self.workers.values()))
            raise APIError(400, f"'model' is required: this server serves {self.names()}", param="model")
        if name in self.workers:
            return self.workers[name]
        folded = [n for n in self.workers if n.lower() == name.lower()]
        if len(folded) == 1:
            return self.workers[folded[0]]
        raise APIError(404, f"the model '{name}' does not exist; this server serves {self.names()}",
                       param="model", code="model_not_found")

    def unload_idle(self, idle_seconds: float) -> list[str]:
        return [name for name, w in self.workers.items() if w.unload_if_idle(idle_seconds)]

    def close(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()
