"""The parts of the completion service that its rooms share, handed to each as one value."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lsp_server.config.settings import Settings
from lsp_server.inline.memory import SuggestionMemory
from lsp_server.inline.rejections import Rejections
from lsp_server.inline.show_gate import ShowGate
from lsp_server.serving.model_lifecycle import ModelLifecycle
from lsp_server.serving.notices import Notices
from lsp_server.serving.scheduler import Gate
from lsp_server.telemetry.counts import Spawn, Telemetry
from lsp_server.text.documents import Documents
from lsp_server.workspace.recent_edits import RecentEdits


@dataclass(frozen=True)
class Parts:
    settings: Callable[[], Settings]  # the settings of now (a change replaces the object)
    documents: Documents
    models: ModelLifecycle
    notices: Notices
    telemetry: Telemetry
    memory: SuggestionMemory  # suggestions shown or prefetched, for type-through
    rejections: Rejections  # suggestions shown again and again at one place, never taken
    edits: RecentEdits  # what the person just edited, across files
    show_gate: ShowGate  # whether this person is likely to take a suggestion
    gate: Gate  # completions before chat tasks
    spawn: Spawn  # background work, held by the service until it ends
