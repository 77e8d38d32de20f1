"""KEIC's Deletion strategy (Algorithm 1): remove what contradicts the corrected facts, turn by turn.

- ``editor``: :class:`DeletionEditor`, the algorithm (fact queue, token budget, seeds from located spans);
- ``backends``: the INCONSISTENT / DELETE interfaces, the turn and fact views, token estimates;
- ``nli``: the local backend (NLI judge + rule rewriter); ``llm``: the upstream model with App. F's prompts.
"""

from keproxy.editors.history.deletion.backends import InconsistencyJudge, Rewriter, TokenBudget
from keproxy.editors.history.deletion.editor import TOKEN_BUDGET, DeletionEditor, DeletionRun
from keproxy.editors.history.deletion.llm import LLMBackend
from keproxy.editors.history.deletion.nli import NLIJudge, RuleRewriter

__all__ = [
    "TOKEN_BUDGET",
    "DeletionEditor",
    "DeletionRun",
    "InconsistencyJudge",
    "LLMBackend",
    "NLIJudge",
    "Rewriter",
    "RuleRewriter",
    "TokenBudget",
]
