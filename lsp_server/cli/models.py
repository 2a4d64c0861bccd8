"""`fastcomplete models ...`: build, list, measure and verify models. Each subcommand parses
arguments and calls one plain function (models/)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from models.genai_build import NBitsScheme

EXIT_ERROR = 1


def _fast_choice(path: Path | None) -> dict | None:
    """bench/fast_choice.py's report: its pick and what it measured."""
    from models.fast_choice import manifest_record

    if path is None:
        return None
    try:
        return manifest_record(json.loads(path.read_text()), path.name)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SystemExit(
            f"fastcomplete: --fast-choice {path}: not a fast_choice report ({exc})"
        ) from None


def _models_build(args: argparse.Namespace) -> int:
    from models.build import BuildRequest, build
    from models.build_env import (
        install_build_env,
        installed_build_env,
        missing_build_tools,
        run_in_build_env,
    )
    from models.source import check_named_source

    if args.bits == 16 and not args.cuda:
        print(
            "fastcomplete: --bits 16 (an FP16 fast model) is for CUDA builds: add --cuda",
            file=sys.stderr,
        )
        return EXIT_ERROR
    check_named_source(args.from_gguf, args.from_hf)  # a file missing is said before tools missing
    missing = missing_build_tools()
    if missing:  # a server installed without the build tools (uv tool, pipx)
        python = installed_build_env()
        if python is None and args.install_build_env:
            python = install_build_env()
        if python is None:
            print(
                f"fastcomplete: building a model needs {', '.join(missing)}, which the server "
                "does not install. Either:\n"
                "  fastcomplete models build --install-build-env   (installs them under "
                "$FASTCOMPLETE_HOME: a few GB from PyPI, once)\n"
                "  make models                                      (in a clone of the repository)",
                file=sys.stderr,
            )
            return EXIT_ERROR
        return run_in_build_env(python, [a for a in args.argv if a != "--install-build-env"])

    request = BuildRequest(
        name=args.name,
        model=args.model,
        from_gguf=args.from_gguf,
        from_hf=args.from_hf,
        tiny=args.tiny,
        force=args.force,
        block_size=args.block_size,
        bits=args.bits,
        cuda=args.cuda,
        fast_choice=_fast_choice(args.fast_choice),
    )
    if request.fast_choice is not None and args.bits is None:
        request.bits = int(request.fast_choice["bits"])
    result = build(request, quiet=args.quiet)
    if not result.built:
        print(f"{result.name}: already built and intact at {result.path} (--force rebuilds)")
        return 0
    fig = result.manifests["fast"].validation
    print(
        f"{result.name}: built in {result.seconds:.0f} s at {result.path}\n"
        f"  fast vs standard top-1 agreement {fig['top1_agreement']:.3f} over {fig['tokens']} "
        f"tokens; NLL standard {fig['nll_standard']:.3f}, fast {fig['nll_fast']:.3f}"
    )
    return 0


def _models_list(args: argparse.Namespace) -> int:
    from models.catalogue import CATALOGUE
    from models.registry import list_models

    statuses = list_models()
    built = {s.name for s in statuses}
    if args.json and args.catalogue:
        catalogue = [
            {
                "name": e.name,
                "summary": e.summary,
                "download_bytes": e.gguf_bytes,
                "wheels": len(e.wheels),
                "fim": e.fim,
                "license": e.license,
                "built": e.name in built,
            }
            for e in CATALOGUE.values()
        ]
        print(json.dumps(catalogue, indent=2))
        return 0
    if args.json:
        print(json.dumps([s.to_json() for s in statuses], indent=2))
        return 0
    print("can be built (fastcomplete models build --model NAME):")
    for e in CATALOGUE.values():
        mark = "built" if e.name in built else f"{e.gguf_bytes / 1e6:.0f} MB download"
        print(f"  {e.name:<20} {mark:<18} {e.summary}")
    print("built:")
    if not statuses:
        print("  no models built yet: run `fastcomplete models build`")
    for s in statuses:
        info = s.to_json()
        size = f"{info['size_bytes'] / 1e6:.0f} MB" if info["size_bytes"] else "?"
        agree = (info["validation"] or {}).get("top1_agreement")
        state = "ok" if s.manifest and not s.problems else "BROKEN: " + "; ".join(s.problems)
        print(
            f"{s.name:<20} {s.variant:<9} {info['precision'] or '?':<17} {size:>7}  "
            f"agreement {agree}  {state}"
        )
    return 0


def _models_measure(args: argparse.Namespace) -> int:
    from inference.device import gpu_present
    from inference.paths import models_dir, variant_dir
    from inference.tuning import T_FIRST_SUGGESTION_P95_MS
    from models.choice import Gpu, default_choice, gpu_info, record_p95
    from models.measure import NEW_TOKENS, PROMPT_TOKENS, first_suggestion

    gpu = gpu_info() if gpu_present() else None
    if gpu is None and not args.allow_cpu:
        print(
            "fastcomplete: no GPU described by nvidia-smi: on a CPU the default is chosen by "
            "keystrokes saved, not measured here (--allow-cpu measures the CPU anyway)",
            file=sys.stderr,
        )
        return 2
    root = models_dir()
    built = [p.name for p in root.iterdir()] if root.is_dir() else []
    names = args.model or sorted(
        n for n in built if (root / n / "fast" / "manifest.json").is_file()
    )
    if not names:
        print(
            "fastcomplete: no model is built yet: run `fastcomplete models build`", file=sys.stderr
        )
        return EXIT_ERROR
    print(f"first suggestion: {PROMPT_TOKENS} prompt tokens cold, {NEW_TOKENS} new tokens")
    for name in names:
        result = first_suggestion(variant_dir(name, "fast"), prefer_gpu=gpu is not None)
        verdict = "within" if result.p95_ms <= T_FIRST_SUGGESTION_P95_MS else "over"
        print(
            f"  {name} ({result.device}): p50 {result.p50_ms:.0f} ms, p95 {result.p95_ms:.0f} ms "
            f"({verdict} the {T_FIRST_SUGGESTION_P95_MS:.0f} ms budget)"
        )
        if result.device == "cuda" and gpu is not None:
            record_p95(gpu, name, result.p95_ms)
        elif args.allow_cpu:
            record_p95(Gpu("cpu", 0), name, result.p95_ms)
    if gpu is not None:
        choice = default_choice()
        print(f"default model on {gpu.name}: {choice.model} ({choice.reason})")
    return 0


def _models_verify(args: argparse.Namespace) -> int:
    from models.registry import verify

    statuses = verify(args.name)
    for s in statuses:
        print(f"{s.name} {s.variant}: " + ("ok" if not s.problems else "; ".join(s.problems)))
    return 0 if all(not s.problems for s in statuses) else EXIT_ERROR


def add_models_parser(sub: argparse._SubParsersAction) -> None:
    from models.choice import selected_model

    default = selected_model()  # on a GPU machine this reads the built models: once
    models = sub.add_parser("models", help="build, list and verify models").add_subparsers(
        dest="models_command", required=True
    )
    _add_build_parser(models, default)
    _add_list_parser(models)
    _add_measure_parser(models)
    _add_verify_parser(models, default)


def _add_build_parser(models: argparse._SubParsersAction, default: str) -> None:
    b = models.add_parser("build", help="build the standard (FP32) and fast (INT8) models")
    _add_build_sources(b, default)
    b.add_argument("--name", help="model name under $FASTCOMPLETE_HOME/models")
    b.add_argument("--force", action="store_true", help="rebuild even if a valid build exists")
    _add_fast_model_options(b)
    b.add_argument(
        "--cuda",
        action="store_true",
        help="CUDA graphs for a GPU machine (FP16 standard model); built and checked on the CPU "
        "too, where there is no GPU",
    )
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    b.add_argument(
        "--install-build-env",
        action="store_true",
        help="where the build tools are missing (an installed server), install them under "
        "$FASTCOMPLETE_HOME first (a few GB from PyPI, once)",
    )
    b.set_defaults(func=_models_build)


def _add_build_sources(b: argparse.ArgumentParser, default: str) -> None:
    """Where the weights come from: one of these at most."""
    src = b.add_mutually_exclusive_group()
    src.add_argument(
        "--model",
        metavar="NAME",
        help=f"a catalogue model (`models list`); default here: {default}",
    )
    src.add_argument("--from-gguf", type=Path, metavar="FILE", help="a Llama-family GGUF file")
    src.add_argument("--from-hf", type=Path, metavar="DIR", help="a Hugging Face model folder")
    src.add_argument("--tiny", action="store_true", help="a tiny random model for tests")


def _add_fast_model_options(b: argparse.ArgumentParser) -> None:
    """How the fast model's weights are quantized."""
    b.add_argument(
        "--block-size",
        type=int,
        choices=(16, 32, 64, 128),
        default=NBitsScheme.block_size,
        help="fast model's 8-bit block size: 32 (default) keeps the most quality, 128 prefills "
        "~25%% faster",
    )
    b.add_argument(
        "--bits",
        type=int,
        choices=(16, 8, 4),
        default=None,
        help="fast model's weight bits: 8 (the CPU's default) or 4 (smaller, lower agreement); "
        "16 (FP16, --cuda only, the default there: the standard graph, loaded once)",
    )
    b.add_argument(
        "--fast-choice",
        type=Path,
        metavar="FILE",
        help="build the fast model bench/fast_choice.py picked on this GPU (its --json report)",
    )


def _add_list_parser(models: argparse._SubParsersAction) -> None:
    lst = models.add_parser("list", help="list built models")
    lst.add_argument("--json", action="store_true", help="the built models as JSON")
    lst.add_argument(
        "--catalogue", action="store_true", help="with --json: what can be built instead"
    )
    lst.set_defaults(func=_models_list)


def _add_measure_parser(models: argparse._SubParsersAction) -> None:
    mea = models.add_parser(
        "measure", help="time built models' first suggestion on this GPU (picks the GPU default)"
    )
    mea.add_argument("--model", action="append", help="a built model (repeatable; default: all)")
    mea.add_argument("--allow-cpu", action="store_true", help="measure on the CPU without a GPU")
    mea.set_defaults(func=_models_measure)


def _add_verify_parser(models: argparse._SubParsersAction, default: str) -> None:
    ver = models.add_parser("verify", help="check sha256s and run one forward pass")
    ver.add_argument("name", nargs="?", default=default)
    ver.set_defaults(func=_models_verify)
