"""The ``benchmark`` registry: ``keproxy eval <name>`` commands.

Each benchmark's ``cli.py`` has a typer command function, registered by one line in :data:`BENCHMARKS`; third
parties add benchmarks through the entry-point group ``keproxy.benchmarks`` (see ``keproxy.plugins``).
``keproxy.cli`` adds every registered benchmark to ``keproxy eval``.
"""

from __future__ import annotations

from collections.abc import Callable

from keproxy.plugins import Registry

__all__ = ["BENCHMARKS"]

#: Benchmark name -> its ``keproxy eval`` command. A new benchmark: its package (or module), and one line here.
BENCHMARKS: Registry[Callable[..., None]] = Registry(
    "benchmark",
    "keproxy.benchmarks",
    {
        "keic": "keproxy.eval.keic.cli:eval_keic_command",
        "corrections": "keproxy.eval.corrections.cli:eval_corrections_command",
        "chats": "keproxy.eval.chats.cli:eval_chats_command",
        "postedit": "keproxy.eval.postedit.cli:eval_postedit_command",
        "elken-scope": "keproxy.eval.elken.cli:eval_elken_scope_command",
        "elken": "keproxy.eval.elken.cli:eval_elken_command",
        "mquake": "keproxy.eval.mquake.cli:eval_mquake_command",
        "leme": "keproxy.eval.leme.cli:eval_leme_command",
        "leme-agreement": "keproxy.eval.leme.cli:eval_leme_agreement_command",
        "judges": "keproxy.eval.judges.cli:eval_judges_command",
    },
)
