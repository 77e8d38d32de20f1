"""postEdit's black-box evaluation (``keproxy eval postedit``, postEdit §5.1, Table 1): CounterFact and zsRE
cases (:mod:`.data`), the run through the proxy for keproxy's edit modes (:mod:`.run`), TE / SE / TR / SR
(:mod:`.metrics`), Table 1 and its plot (:mod:`.report`) and the command line (:mod:`.cli`)."""

from keproxy.eval.postedit.data import DATASET_NAMES, EditCase, dataset_file, load_cases
from keproxy.eval.postedit.metrics import (
    METRICS,
    QUERY_TYPES,
    CaseScores,
    MetricRow,
    PostEditCase,
    PostEditScorer,
    QueryType,
    entailed,
    paper_test_query,
    se_score,
    table_rows,
    te_score,
    tr_score,
)
from keproxy.eval.postedit.report import plot_table, table_csv, table_markdown
from keproxy.eval.postedit.run import (
    PREPROCESS_METHODS,
    PostEditEvalConfig,
    PostEditEvalReport,
    method_names,
    run_postedit_eval,
)

__all__ = [
    "DATASET_NAMES",
    "METRICS",
    "PREPROCESS_METHODS",
    "QUERY_TYPES",
    "CaseScores",
    "EditCase",
    "MetricRow",
    "PostEditCase",
    "PostEditEvalConfig",
    "PostEditEvalReport",
    "PostEditScorer",
    "QueryType",
    "dataset_file",
    "entailed",
    "load_cases",
    "method_names",
    "paper_test_query",
    "plot_table",
    "run_postedit_eval",
    "se_score",
    "table_csv",
    "table_markdown",
    "table_rows",
    "te_score",
    "tr_score",
]
