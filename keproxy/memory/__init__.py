"""Edit memory: the edits (postEdit §3.1), their store, their FAISS index and retrieval.

:class:`Edit` is one piece of knowledge; :class:`EditStore` / :class:`SQLiteEditStore` keep edits with their
version history and a change log; :class:`EditIndex` is the FAISS inner-product index of their MiniLM
embeddings; :class:`EditMemory` ties store, :class:`Embedder` and index together and implements
:class:`EditRetriever` with exact scope filtering; :func:`import_edits` reads CounterFact, zsRE and JSON-lines
files.
"""

from keproxy.memory.edits import (
    Edit,
    EditKind,
    EditRetriever,
    EditScope,
    EditScopeKind,
    EditSource,
    RetrievedEdit,
    new_edit_id,
)
from keproxy.memory.embeddings import Embedder
from keproxy.memory.importers import IMPORT_FORMATS, import_edits
from keproxy.memory.index import DEFAULT_FLAT_THRESHOLD, EditIndex
from keproxy.memory.memory import EditMemory
from keproxy.memory.store import EditChange, EditStore, SQLiteEditStore

__all__ = [
    "DEFAULT_FLAT_THRESHOLD",
    "IMPORT_FORMATS",
    "Edit",
    "EditChange",
    "EditIndex",
    "EditKind",
    "EditMemory",
    "EditRetriever",
    "EditScope",
    "EditScopeKind",
    "EditSource",
    "EditStore",
    "Embedder",
    "RetrievedEdit",
    "SQLiteEditStore",
    "import_edits",
    "new_edit_id",
]
