"""Where a completion can be served, and what it is planned on: the view of the document at the
cursor, the plan (context, model, token ids: lsp_server.completion.plan) and its run. Used by the
request path and by idle work alike, so that both plan the same prompt at the same place."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple, Protocol

from tree_sitter import Tree

from inference.engine import Engine
from lsp_server.completion.plan import CompletionPlan, Cursor, PipelineOptions, Request, plan_at
from lsp_server.completion.run import Completion, complete_at, run_completion
from lsp_server.config.settings import Settings
from lsp_server.config.tuning import TREE_MAX_CHARS
from lsp_server.prompting.context import AboveWindow, cursor_place
from lsp_server.prompting.names import index_names
from lsp_server.serving.notices import Notices
from lsp_server.telemetry.counts import Telemetry
from lsp_server.text.documents import Snapshot, around_cursor
from lsp_server.text.positions import offset_at
from lsp_server.workspace.exclusions import Exclusions
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.recent_edits import Recent, RecentEdits
from lsp_server.workspace.snippets import RepoSources, SnippetChooser, budget_chars


class View(NamedTuple):
    """The text a completion is planned on, the cursor in it, and its tree when it has one."""

    text: str
    line: int
    character: int  # UTF-16
    tree: Tree | None


class Models(Protocol):
    """The engine, once it can serve (lsp_server.serving.ModelLifecycle; the eval's loaded one)."""

    @property
    def engine(self) -> Engine | None: ...

    @property
    def serving(self) -> bool: ...


class Workspace(Protocol):
    """The workspace index when there is one, and what must never be read
    (lsp_server.workspace.index.Indexer; the eval's built index)."""

    @property
    def index(self) -> WorkspaceIndex | None: ...

    @property
    def exclusions(self) -> Exclusions: ...


class Planner:
    def __init__(
        self,
        *,
        settings: Callable[[], Settings],
        models: Models,
        workspace: Workspace,
        edits: RecentEdits,
        notices: Notices,
        telemetry: Telemetry,
        options: PipelineOptions = PipelineOptions(),
    ) -> None:
        """`options`: the eval's ablations (the server runs with everything on)."""
        self._settings = settings
        self._models = models
        self._notices = notices
        self._telemetry = telemetry
        self._edits = edits
        self._workspace = workspace
        self._options = options
        self.snippets = SnippetChooser(lambda: budget_chars(settings().contextTokens))
        self.above_window = AboveWindow()

    def unservable(self, snap: Snapshot) -> str | None:
        """Why no completion can be given in this document now, or None."""
        if not self._settings().enabled_for(snap.language_id):
            return "disabled"
        if self._workspace.exclusions.excluded(snap.uri):
            return "excluded"  # a secret (.env, keys) or listed in .fastcompleteignore
        if not self._models.serving:
            return "not_ready"
        if "\x00" in snap.text:
            return "refused_binary"
        return None

    def quiet_place(self, snap: Snapshot, line: int, character: int) -> str | None:
        """The comment or string the cursor is in, when the settings keep automatic suggestions
        away from it there (quietIn), else None. Raises PositionError."""
        places = self._settings().quiet_in(snap.language_id)
        if not places or snap.tree is None:
            return None  # (no grammar, or a document too large to keep a tree of)
        before = snap.text[: offset_at(snap.text, line, character)]
        line_prefix = before.rsplit("\n", 1)[-1]
        place = cursor_place(snap.tree.root_node, len(before.encode("utf-8")), line_prefix)
        return place if place in places else None

    def cursor_view(self, snap: Snapshot, line: int, character: int) -> View:
        """What planning sees: the document, or an excerpt of a large one (on the event loop)."""
        # Beyond the size a tree is kept for, completions see the text around the cursor only.
        if len(snap.text) <= TREE_MAX_CHARS:
            return View(snap.text, line, character, snap.tree)
        self._telemetry.counts["trimmed_large"] += 1
        self._notices.tell_once(
            f"fastcomplete: {snap.uri} is large ({len(snap.text) >> 20} MB): completions use the "
            "text around the cursor only",
            "info",
        )
        return View(*around_cursor(snap.text, line, character), None)

    def plan(self, snap: Snapshot, view: View, *, cold_ok: bool = False) -> CompletionPlan:
        """The plan at the cursor (on a worker thread): context, route and token ids; see
        `request` for `cold_ok`. Raises PositionError."""
        request = self.request(snap, view, cold_ok=cold_ok)
        return plan_at(
            self._models.engine, _cursor(snap, view), self._settings(), request, self._options
        )

    def request(
        self,
        snap: Snapshot,
        view: View,
        *,
        cold_ok: bool = False,
        resting: bool = False,
        candidates: int = 1,
        ahead: bool = False,
    ) -> Request:
        """What a completion at the cursor is asked with: the repository's snippets, recent
        edits and names, the window above the cursor, and the request's shape. `cold_ok`: a
        prompt too cold to prefill in time may be planned short (coldContext), within
        coldPrefillMs, or restPrefillMs when `resting`; `candidates`: how many distinct items to
        answer with; `ahead`: a prefetch."""
        settings = self._settings()
        index = self._workspace.index
        chosen = self.snippets.choose(snap.uri, snap.text, view.line, self._sources(snap))
        recent = Recent()
        if settings.recentEdits:
            recent = self._edits.recent(snap.uri, _document_line(snap, view))
            chosen = [*chosen, *recent.snippets]
        cold = cold_ok and settings.coldContext
        searched = self._searched()
        return Request(
            snippets=tuple(chosen),
            repo=index.root.name if index else "",
            above=self.above_window,
            prefill_budget_s=_cold_budget_ms(settings, resting) / 1000 if cold else None,
            candidates=candidates,
            ahead=ahead,
            repo_names=index_names(searched, searched.relative(snap.uri)) if searched else None,
            recent_names=recent.names,
        )

    def _searched(self) -> WorkspaceIndex | None:
        """The workspace index, when the settings let prompts use it."""
        return self._workspace.index if self._settings().workspaceIndex else None

    def _sources(self, snap: Snapshot) -> RepoSources:
        options = self._options
        return RepoSources(
            snap.others,
            self._searched(),
            self._workspace.exclusions,
            definitions=options.definitions,
            index_snippets=options.index_snippets,
        )

    def run(
        self, plan: CompletionPlan, snap: Snapshot, view: View, cancel: threading.Event
    ) -> Completion:
        """Generate, post-process and check `plan` (on a worker thread)."""
        assert self._models.engine is not None
        return run_completion(
            self._models.engine,
            plan,
            view.text,
            snap.language_id,
            cancel=cancel,
            options=self._options,
            tree=view.tree,
        )

    def plan_and_run(
        self,
        snap: Snapshot,
        view: View,
        cancel: threading.Event,
        *,
        cold_ok: bool = False,
        resting: bool = False,
        ahead: bool = False,
        candidates: int = 1,
        on_text: Callable[[str], None] | None = None,
    ) -> tuple[CompletionPlan, Completion]:
        """Plan and run at the cursor (on a worker thread); see `request` for the flags (with
        `ahead`, the end of a line means the line after it). `on_text`: the model's raw text so
        far."""
        assert self._models.engine is not None
        request = self.request(
            snap, view, cold_ok=cold_ok, resting=resting, candidates=candidates, ahead=ahead
        )
        cursor = _cursor(snap, view)
        return complete_at(
            self._models.engine,
            cursor,
            self._settings(),
            cancel=cancel,
            request=request,
            options=self._options,
            on_text=on_text,
        )


def _cursor(snap: Snapshot, view: View) -> Cursor:
    return Cursor(view.text, view.line, view.character, snap.language_id, snap.uri, view.tree)


def _document_line(snap: Snapshot, view: View) -> int:
    """The cursor's line in the document (-1 in an excerpt of a large one: its line numbers are
    the excerpt's)."""
    return view.line if view.text is snap.text else -1


def _cold_budget_ms(settings: Settings, resting: bool) -> int:
    """The prefill a request may wait for before it is answered from the nearest lines."""
    return (
        max(settings.coldPrefillMs, settings.restPrefillMs) if resting else settings.coldPrefillMs
    )
