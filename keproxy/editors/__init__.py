"""History editors and correction detection (and, later, response post-editors).

Detectors find corrections in user turns (KEIC App. B.2 templates, cue words); history editors apply them
to the conversation before it goes upstream (KEIC §3: ``otc``, ``patch``).
"""

from keproxy.corrections.base import Correction, CorrectionDetector
from keproxy.editors.base import EditContext, HistoryEditor, HistoryEditResult, TextEdit
from keproxy.editors.detection import CompositeDetector, CueDetector, TemplateDetector, default_detector
from keproxy.editors.locate import LocatedSpan, SpanLocator
from keproxy.editors.otc import OTCEditor
from keproxy.editors.patch import PatchEditor
from keproxy.editors.registry import EditorRegistry
from keproxy.editors.templates import TEMPLATES, fill_template

__all__ = [
    "TEMPLATES",
    "CompositeDetector",
    "Correction",
    "CorrectionDetector",
    "CueDetector",
    "EditContext",
    "EditorRegistry",
    "HistoryEditResult",
    "HistoryEditor",
    "LocatedSpan",
    "OTCEditor",
    "PatchEditor",
    "SpanLocator",
    "TemplateDetector",
    "TextEdit",
    "default_detector",
    "fill_template",
]
