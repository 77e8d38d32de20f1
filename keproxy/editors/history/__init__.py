"""History editors: KEIC §3's strategies, one module each, named by the strategy registry (``registry``).

``otc`` (One-Turn Correction: pass through), ``patch`` (the located stale spans rewritten),
``reiterate-oracle`` (the story patched, added as T_r), ``verification``, ``reiterate``, ``deletion``
(Algorithm 1, a package); ``prompts``: the KEIC prompts they send.
"""

from keproxy.editors.history.otc import OTCEditor
from keproxy.editors.history.patch import PatchEditor
from keproxy.editors.history.registry import HISTORY_EDITORS, EditorRegistry, EditorResources, strategy_names

__all__ = [
    "HISTORY_EDITORS",
    "EditorRegistry",
    "EditorResources",
    "OTCEditor",
    "PatchEditor",
    "strategy_names",
]
