"""Response post-editing (postEdit) and the pre-processing baselines PROMPT / IKE / SERAC.

postEdit (the seed paper "Assessing and Post-Processing Black Box Large Language Models for Knowledge
Editing", §4, Algorithm 3): the upstream answers the unchanged request; keproxy retrieves the edit most
similar to the query from the edit memory and, when its score passes the gate, a *post-editor* rewrites the
answer with the edit or answers ``<Retain>``. The edit never reaches the upstream (unless the ``llm``
post-editor is pointed at the upstream itself).

Post-editors (:class:`PostEditorRegistry`): ``span`` (rules), ``located`` (the stale tagger's locate and rewrite),
``llm`` (chat model + T^edit), ``local``
(causal LM + LoRA adapter, by transformers, optionally bitsandbytes 8-bit, or by llama.cpp from a merged GGUF:
``runtime: gguf``); more through the entry-point group ``keproxy.post_editors``.
"""

from keproxy.editors.postedit.base import PostEditor, PostEditResult, edit_objects, gate
from keproxy.editors.postedit.llm import LLMPostEditor
from keproxy.editors.postedit.local import LocalPostEditor
from keproxy.editors.postedit.local_gguf import GgufPostEditor
from keproxy.editors.postedit.located import LocatedPostEditor
from keproxy.editors.postedit.preprocess import PreprocessMode, PreprocessResult, preprocess
from keproxy.editors.postedit.prompts import RETAIN_TOKEN, T_AUG, T_EDIT, fill_t_aug, fill_t_edit, is_retain
from keproxy.editors.postedit.registry import POST_EDITORS, PostEditorRegistry, PostEditorResources
from keproxy.editors.postedit.span import SpanPostEditor

__all__ = [
    "POST_EDITORS",
    "RETAIN_TOKEN",
    "T_AUG",
    "T_EDIT",
    "GgufPostEditor",
    "LLMPostEditor",
    "LocalPostEditor",
    "LocatedPostEditor",
    "PostEditResult",
    "PostEditor",
    "PostEditorRegistry",
    "PostEditorResources",
    "PreprocessMode",
    "PreprocessResult",
    "SpanPostEditor",
    "edit_objects",
    "fill_t_aug",
    "fill_t_edit",
    "gate",
    "is_retain",
    "preprocess",
]
