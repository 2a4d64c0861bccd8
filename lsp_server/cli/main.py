"""The `fastcomplete` command. Each subcommand parses arguments and calls one plain function."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_server.cli.models import EXIT_ERROR, add_models_parser

if TYPE_CHECKING:  # imported where used: `fastcomplete --help` starts without the engine
    from inference.engine import Engine
    from lsp_server.completion.plan import CompletionPlan
    from lsp_server.completion.run import Completion
    from lsp_server.config.settings import Settings

EXIT_INTERRUPTED = 130


def _doctor(args: argparse.Namespace) -> int:
    from lsp_server.cli.doctor import doctor

    return doctor(as_json=args.json)


def _complete(args: argparse.Namespace) -> int:
    """One completion through the server's own pipeline, as an editor with FILE open would get."""
    import threading

    from lsp_server.completion.plan import Cursor, plan_at
    from lsp_server.completion.run import run_completion
    from lsp_server.text.languages import EXTENSIONS

    text = args.file.read_text()
    language_id = args.language or EXTENSIONS.get(args.file.suffix, "")
    settings = _complete_settings(args)
    engine, load_ms = _loaded_engine(cache=not args.no_cache)
    cursor = Cursor(text, args.line, args.character, language_id, args.file.resolve().as_uri())
    plan = plan_at(engine, cursor, settings)
    warm_ms = None if args.cold else _warm(engine, plan)
    done = run_completion(engine, plan, text, language_id, cancel=threading.Event())
    out = _completion_report(done, plan, load_ms, warm_ms)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        _print_completion(out, done.syntax_rejected)
    return 0


def _complete_settings(args: argparse.Namespace) -> Settings:
    from lsp_server.config.settings import Settings

    return Settings(
        fastMode=not args.standard,
        maxTokens=args.max_tokens,
        multiline="never" if args.single_line else Settings.multiline,
    )


def _loaded_engine(cache: bool) -> tuple[Engine, float]:
    """The engine with both models loaded, and how long loading took (ms)."""
    import contextlib
    import time

    from inference.engine import Engine, EngineConfig
    from inference.errors import ModelLoadError
    from inference.router import FAST, STANDARD
    from models.choice import selected_model

    cache_dir = EngineConfig().cache_dir if cache else None
    engine = Engine(EngineConfig(model_name=selected_model(), cache_dir=cache_dir))
    # Both models loaded first, as the server does after `initialize`: the prompt's budget is in
    # the answering model's tokens, and a syntax retry on the standard model must not wait on a
    # load. A model that cannot load leaves the other to answer, as in the server.
    started = time.perf_counter()
    for variant in (FAST, STANDARD):
        with contextlib.suppress(ModelLoadError):
            engine.load(variant)
    return engine, round((time.perf_counter() - started) * 1000, 1)


def _warm(engine: Engine, plan: CompletionPlan) -> float | None:
    """Warm the prompt, as an editor does where the cursor rests before the user asks; how long
    it took (ms), None with no prompt."""
    import threading
    import time

    if not plan.prompt.strip():
        return None
    started = time.perf_counter()
    engine.warm(plan.serving, plan.prompt, plan.tokens, threading.Event(), plan.config.heal)
    return round((time.perf_counter() - started) * 1000, 1)


def _completion_report(
    done: Completion, plan: CompletionPlan, load_ms: float, warm_ms: float | None
) -> dict[str, Any]:
    """What `complete` tells: the text shown, the model's own, and the timings."""
    result = done.result
    gen = result.generation if result else None
    return {
        "text": done.text,
        "raw_text": result.text if result else "",
        "model": result.model_id if result else None,
        "variant": result.variant if result else None,
        "finish": result.finish.value if result else "empty_prompt",
        "cached": bool(result and result.cached),
        "fallback": bool(result and result.fallback),
        "single_line": plan.site.single_line,
        "syntax_rejected": done.syntax_rejected,
        "prompt_tokens": gen.prompt_tokens if gen else None,
        "trimmed_tokens": gen.trimmed_tokens if gen else None,
        "reused_tokens": gen.reused_tokens if gen else None,
        "new_tokens": gen.new_tokens if gen else None,
        "load_ms": load_ms,
        "warm_ms": warm_ms,
        "ttft_ms": round(gen.ttft_s * 1000, 1) if gen and gen.ttft_s is not None else None,
        "tpot_ms": round(gen.tpot_s * 1000, 1) if gen and gen.tpot_s is not None else None,
        "total_ms": round(gen.total_s * 1000, 1) if gen else 0.0,
        "deadline_ms": round((plan.config.deadline_s or 0) * 1000),
    }


def _print_completion(out: dict[str, Any], syntax_rejected: bool) -> None:
    """The text on stdout (or why there is none), then the figures on stderr."""
    if out["text"]:
        print(out["text"])
    else:
        why = "it would add a syntax error" if syntax_rejected else "by post-processing"
        print(f"(nothing shown: the model wrote {out['raw_text']!r}, removed {why})")
    sys.stdout.flush()  # the text first, then the figures on stderr
    print(
        f"-- {out['model']} ({out['finish']}{', cached' if out['cached'] else ''}"
        f"{', fallback' if out['fallback'] else ''}): prompt {out['prompt_tokens']} tokens "
        f"({out['reused_tokens']} reused), {out['new_tokens']} new, "
        f"warm-up {out['warm_ms']} ms, TTFT {out['ttft_ms']} ms, TPOT {out['tpot_ms']} ms, "
        f"total {out['total_ms']} ms",
        file=sys.stderr,
    )


def _serve(args: argparse.Namespace) -> int:
    from lsp_server.protocol.server import serve
    from lsp_server.telemetry.observability import setup_logging

    # stdout carries the protocol: logs go to stderr (the editor's log) and a rotating file.
    setup_logging(args.verbose, args.log_file)
    serve(tcp=args.tcp, metrics_port=args.metrics_port, allow_remote=args.allow_remote_host)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from lsp_server.cli.demo import main as demo_main

    return demo_main()


def _eval(args: argparse.Namespace) -> int:
    from inference.engine import Engine, EngineConfig
    from lsp_server.cli.evaluation import (
        ABLATIONS,
        collect_cases,
        default_roots,
        print_report,
        run_eval,
    )
    from models.choice import selected_model

    if args.workspace:
        return _eval_workspace(args)
    roots = [args.path] if args.path else default_roots()
    cases = collect_cases(roots, args.language, args.n, args.seed)
    if not cases:
        print(f"fastcomplete: error: no source files found under {roots}", file=sys.stderr)
        return EXIT_ERROR
    ablations = ABLATIONS if args.ablations else {"full pipeline": ABLATIONS["full pipeline"]}
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    report = run_eval(engine, cases, ablations)
    print_report(report, len(cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"cases": len(cases), "report": report}, indent=2))
    return 0


def _eval_workspace(args: argparse.Namespace) -> int:
    from inference.engine import Engine, EngineConfig
    from inference.paths import fastcomplete_home
    from lsp_server.cli.evaluation import (
        WORKSPACE_ROWS,
        print_report,
        run_workspace_eval,
        workspace_cases,
    )
    from lsp_server.workspace.exclusions import Exclusions
    from models.choice import selected_model

    root = args.workspace.resolve()
    if not root.is_dir():
        print(f"fastcomplete: error: {root} is not a folder", file=sys.stderr)
        return EXIT_ERROR
    cases = workspace_cases(root, args.n, args.seed, Exclusions(root))
    if not cases:
        print(f"fastcomplete: error: no source files found under {root}", file=sys.stderr)
        return EXIT_ERROR
    rows = WORKSPACE_ROWS if args.ablations else dict(list(WORKSPACE_ROWS.items())[:2])
    if args.workspace_only:
        rows = dict(list(WORKSPACE_ROWS.items())[1:2])
    if args.rows:
        wanted = [w.strip() for w in args.rows.split(",")]
        rows = {k: v for k, v in WORKSPACE_ROWS.items() if any(w in k for w in wanted)}
    engine = Engine(
        EngineConfig(
            model_name=selected_model(), cache_dir=None, cache_memory_items=0, kv_store_dir=None
        )
    )
    variants = tuple(args.models.split(","))
    report = run_workspace_eval(
        engine, root, cases, rows, variants, store_dir=fastcomplete_home() / "index"
    )
    print(f"workspace {root}")
    print_report(report, len(cases))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"workspace": str(root), "cases": len(cases), "report": report}
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fastcomplete", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    add_models_parser(sub)
    _add_doctor_parser(sub)
    _add_serve_parser(sub)
    _add_eval_parser(sub)
    demo = sub.add_parser("demo", help="an LSP client session against `fastcomplete serve`")
    demo.set_defaults(func=_demo)
    _add_complete_parser(sub)
    return parser


def _add_doctor_parser(sub: argparse._SubParsersAction) -> None:
    doc = sub.add_parser("doctor", help="what this machine will use and why; what to fix")
    doc.add_argument("--json", action="store_true", help="the checks as JSON (:checkhealth)")
    doc.set_defaults(func=_doctor)


def _add_serve_parser(sub: argparse._SubParsersAction) -> None:
    srv = sub.add_parser("serve", help="run the language server (LSP over stdio)")
    srv.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    srv.add_argument(
        "--allow-remote-host",
        action="store_true",
        help="allow --tcp on an address other machines can reach (your code crosses the network)",
    )
    srv.add_argument("--verbose", action="store_true", help="debug logging (message bodies too)")
    srv.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on 127.0.0.1:PORT")
    srv.add_argument(
        "--log-file", type=Path, help="JSON-lines log (default $FASTCOMPLETE_HOME/logs/server.log)"
    )
    srv.set_defaults(func=_serve)


def _add_eval_parser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="line-completion benchmark on a source tree")
    e.add_argument("path", nargs="?", type=Path, help="default: the Python standard library")
    e.add_argument("--language", help="only this language id (python, typescript, go, ...)")
    e.add_argument("--n", type=int, default=60, help="cursor positions")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--ablations", action="store_true", help="also without context/healing/post")
    e.add_argument("--json", type=Path, help="write the figures here too")
    _add_eval_workspace_options(e)
    e.set_defaults(func=_eval)


def _add_eval_workspace_options(e: argparse.ArgumentParser) -> None:
    e.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="positions cut from this repository's files, the rest of it indexed as the workspace",
    )
    e.add_argument(
        "--models", default="fast,standard", help="with --workspace: fast, standard or both"
    )
    e.add_argument(
        "--workspace-only",
        action="store_true",
        help="with --workspace: only the row with the workspace's context (no file-only row)",
    )
    e.add_argument(
        "--rows",
        metavar="TEXT,...",
        help="with --workspace: the rows whose names contain one of these (e.g. "
        "'workspace:,without names')",
    )


def _add_complete_parser(sub: argparse._SubParsersAction) -> None:
    from lsp_server.config.settings import Settings

    c = sub.add_parser("complete", help="complete FILE at a position (LSP line/UTF-16 character)")
    c.add_argument("file", type=Path)
    c.add_argument("--line", type=int, required=True, help="0-based line")
    c.add_argument("--character", type=int, required=True, help="0-based UTF-16 column")
    c.add_argument("--json", action="store_true")
    c.add_argument("--standard", action="store_true", help="use the standard model (fast mode off)")
    c.add_argument("--language", help="LSP languageId (default: from the file extension)")
    c.add_argument(
        "--max-tokens", type=int, default=Settings.maxTokens, help="the maxTokens setting"
    )
    c.add_argument("--single-line", action="store_true", help='the setting multiline: "never"')
    c.add_argument("--cold", action="store_true", help="no idle warm-up of the prompt first")
    c.add_argument("--no-cache", action="store_true", help="bypass the completion cache")
    c.set_defaults(func=_complete)


def _known_errors() -> tuple[type[Exception], ...]:
    from inference.errors import ModelLoadError
    from inference.manifest import ManifestError
    from inference.router import RoutingError
    from lsp_server.errors import BadRequest
    from lsp_server.text.positions import PositionError
    from models.build import BuildError
    from models.genai_build import GraphBuildError
    from models.source import SourceError
    from models.validate import ValidationError

    return (
        BuildError,
        GraphBuildError,
        ManifestError,
        SourceError,
        ValidationError,
        ModelLoadError,
        RoutingError,
        PositionError,
        BadRequest,
    )


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except KeyboardInterrupt:
        print("fastcomplete: interrupted; nothing was left half-made", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, (*_known_errors(), OSError)):
            print(f"fastcomplete: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.argv = argv  # `models build` may run itself again in the build environment
    return run(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
