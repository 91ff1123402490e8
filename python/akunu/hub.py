"""Model.from_pretrained: models from the Hugging Face Hub (huggingface_hub), or from its local
cache when offline (HF_HUB_OFFLINE=1 or local_files_only=True).

GGUF repositories: one .gguf is downloaded (the one named, the only one, or the preferred
quantization below); SafeTensors / MLX repositories: config, tokenizer and weight files.
"""

from __future__ import annotations

import os
import re

# Quantizations akunu runs, in the order a repository's files are preferred when it offers
# several and the caller names none (small and fast first; extend as backends learn formats).
DEFAULT_GGUF_PREFERENCE = ("Q4_1", "Q4_0", "Q8_0", "F16", "BF16", "F32")

# What a SafeTensors/MLX checkpoint needs from its repository.
CHECKPOINT_PATTERNS = ["*.json", "*.safetensors", "*.jinja", "tokenizer.model"]

_SPLIT_GGUF = re.compile(r"-\d{5}-of-\d{5}\.gguf$", re.IGNORECASE)
_TRUE = ("1", "on", "yes", "true")


def _quant_tag(filename: str, tag: str) -> bool:
    """`tag` ("Q4_0") appears in the file name as a whole word (not Q4_0_4_4, not BF16 for F16)."""
    return re.search(rf"(?<![A-Z0-9]){re.escape(tag)}(?![A-Z0-9_])", os.path.basename(filename).upper()) is not None


def choose_gguf(repo_id: str, files: list[str]) -> str:
    """The .gguf of `files` to load when the caller named none; ValueError listing the choices
    when there is no single sensible one."""
    ggufs = sorted(f for f in files if f.lower().endswith(".gguf"))
    candidates = [f for f in ggufs if not _SPLIT_GGUF.search(f) and not os.path.basename(f).lower().startswith("mmproj")]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise ValueError(f"{repo_id}: no loadable .gguf file (split GGUFs and mmproj files are not supported): "
                         f"{', '.join(ggufs)}")
    for tag in DEFAULT_GGUF_PREFERENCE:
        matches = [f for f in candidates if _quant_tag(f, tag)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise ValueError(f"{repo_id}: several {tag} files; pass filename= one of: {', '.join(matches)}")
    raise ValueError(f"{repo_id}: several .gguf files and none of the default quantizations "
                     f"({', '.join(DEFAULT_GGUF_PREFERENCE)}); pass filename= one of: {', '.join(candidates)}")


def _offline(local_files_only: bool | None) -> bool:
    if local_files_only:
        return True
    from huggingface_hub import constants

    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE or bool(constants.HF_HUB_OFFLINE)


def _list_files(repo_id: str, revision, cache_dir, offline: bool, token) -> tuple[list[str], str | None]:
    """(files of the repository, the local snapshot directory when offline)."""
    from huggingface_hub import HfApi, snapshot_download

    if offline:
        try:
            snapshot = snapshot_download(repo_id, revision=revision, cache_dir=cache_dir, local_files_only=True)
        except Exception as e:  # LocalEntryNotFoundError and friends: say what to do
            raise FileNotFoundError(f"{repo_id} is not in the local Hugging Face cache"
                                    f"{' (' + str(cache_dir) + ')' if cache_dir else ''} and the hub is offline "
                                    f"(HF_HUB_OFFLINE / local_files_only): download it once online ({e})") from e
        files = []
        for root, _, names in os.walk(snapshot):
            files += [os.path.relpath(os.path.join(root, n), snapshot) for n in names]
        return files, snapshot
    return list(HfApi().list_repo_files(repo_id, revision=revision, token=token)), None


def resolve_pretrained(repo_id: str, filename: str | None = None, *, revision: str | None = None,
                       cache_dir: str | os.PathLike | None = None, local_files_only: bool | None = None,
                       token: str | bool | None = None) -> str:
    """A local path Model() can load for `repo_id`: a .gguf file or a checkpoint directory."""
    try:
        from huggingface_hub import hf_hub_download, snapshot_download
    except ImportError as e:  # pragma: no cover - a dependency
        raise ImportError("Model.from_pretrained needs huggingface_hub: pip install huggingface-hub") from e
    if not isinstance(repo_id, str) or not repo_id:
        raise ValueError(f"repo_id must be a non-empty string like 'org/name', got {repo_id!r}")
    cache_dir = os.fspath(cache_dir) if cache_dir is not None else None
    offline = _offline(local_files_only)
    common = dict(revision=revision, cache_dir=cache_dir, local_files_only=offline, token=token)

    def download(name: str) -> str:
        try:
            return hf_hub_download(repo_id, name, **common)
        except Exception as e:
            if offline:
                raise FileNotFoundError(f"{repo_id}/{name} is not in the local Hugging Face cache and the hub is "
                                        f"offline ({e})") from e
            raise

    if filename is not None:
        if not filename.lower().endswith(".gguf"):
            raise ValueError(f"filename names a GGUF file to load from {repo_id}, got {filename!r} (SafeTensors "
                             "repositories are loaded whole: leave filename out)")
        return download(filename)
    files, snapshot = _list_files(repo_id, revision, cache_dir, offline, token)
    if any(f.lower().endswith(".gguf") for f in files):
        return download(choose_gguf(repo_id, files))
    if "config.json" in files and any(f.endswith(".safetensors") for f in files):
        if snapshot is not None:
            return snapshot
        return snapshot_download(repo_id, allow_patterns=CHECKPOINT_PATTERNS, **common)
    raise FileNotFoundError(f"{repo_id}: neither .gguf files nor a SafeTensors checkpoint (config.json + "
                            f"*.safetensors) found; files: {', '.join(sorted(files)[:20])}")
