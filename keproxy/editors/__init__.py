"""The knowledge editors, two families behind one narrow interface each.

- ``history``: history editors (KEIC §3 strategies ``otc``, ``patch``, ``reiterate-oracle``, ``verification``,
  ``reiterate``, ``deletion``) take the corrections ``keproxy.corrections`` found and return the conversation
  keproxy forwards upstream, with a trace of every edit; the strategy registry names them.
- ``postedit``: post-editors (postEdit: ``span``, ``llm``, ``local``) rewrite an upstream answer against a
  retrieved edit or retain it; beside them the pre-processing baselines PROMPT / IKE / SERAC.

``base`` holds the history-editing interfaces; ``postedit.base`` the post-editing ones.
"""

from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit, UpstreamCaller
from keproxy.editors.history.otc import OTCEditor
from keproxy.editors.history.patch import PatchEditor
from keproxy.editors.history.registry import HISTORY_EDITORS, EditorRegistry, EditorResources
from keproxy.editors.postedit import POST_EDITORS, PostEditor, PostEditorRegistry

__all__ = [
    "HISTORY_EDITORS",
    "POST_EDITORS",
    "EditContext",
    "EditorRegistry",
    "EditorResources",
    "HistoryEditResult",
    "HistoryEditor",
    "OTCEditor",
    "PatchEditor",
    "PostEditor",
    "PostEditorRegistry",
    "TextEdit",
    "UpstreamCaller",
]
