"""The knowledge editors: history editors (KEIC §3 strategies) and, beside them, response post-editors.

History editors take the corrections ``keproxy.corrections`` found and return the conversation keproxy
forwards upstream (``otc``, ``patch``, ``verification``, ``reiterate``, ``deletion``), with a trace of every
edit; the strategy registry names them.
"""

from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit, UpstreamCaller
from keproxy.editors.history.otc import OTCEditor
from keproxy.editors.history.patch import PatchEditor
from keproxy.editors.history.registry import HISTORY_EDITORS, EditorRegistry, EditorResources

__all__ = [
    "HISTORY_EDITORS",
    "EditContext",
    "EditorRegistry",
    "EditorResources",
    "HistoryEditResult",
    "HistoryEditor",
    "OTCEditor",
    "PatchEditor",
    "TextEdit",
    "UpstreamCaller",
]
