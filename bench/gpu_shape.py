"""A model's CUDA graphs timed on a GPU machine that cannot fetch its weights: the shape is built
with random weights (speed depends on the shape, not the values), through the builder's CUDA
graphs (models/genai_build.py), then measured by bench/gpu_check.py.

    python -m bench.gpu_shape --hf DIR --manifests MODEL_DIR [--name NAME] [--contexts 256,1024,4096]

DIR holds the model's config.json and tokenizer files (no weights); MODEL_DIR is a build of the
same model elsewhere, whose manifests are the template. The Python running this is also the
builder's: it needs onnxruntime_genai's `models` package, transformers 5 and torch.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from bench import gpu_check
    from inference.manifest import GENAI_CUDA_GRAPH, Manifest, describe_files, write_manifest
    from inference.paths import VARIANTS, model_dir
    from models.genai_build import NBitsScheme, build_graph

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hf", type=Path, required=True)
    parser.add_argument("--manifests", type=Path, required=True)
    parser.add_argument("--name", default="random-shape")
    parser.add_argument("--contexts", default="256,1024,4096")
    parser.add_argument("--json", type=Path, default=Path("build/gpu_check/gpu_shape.json"))
    parser.add_argument("--allow-cpu", action="store_true", help="measure on the CPU without a GPU")
    args = parser.parse_args()
    ok, why = gpu_check.gpu_available()
    if not ok and not args.allow_cpu:
        print(f"gpu_shape: no GPU to time: {why}", file=sys.stderr)
        return gpu_check.NO_GPU
    with tempfile.TemporaryDirectory() as tmp:
        hf = Path(tmp) / "hf"
        shutil.copytree(args.hf, hf)
        started = time.perf_counter()
        with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
            model = AutoModelForCausalLM.from_config(
                AutoConfig.from_pretrained(hf), dtype=torch.float16
            )
        model.save_pretrained(hf)
        del model
        print(f"random weights in {time.perf_counter() - started:.1f} s", flush=True)
        for variant in VARIANTS:
            scheme = NBitsScheme() if variant == "fast" else None
            target = model_dir(args.name) / variant
            started = time.perf_counter()
            build_graph(hf, target, scheme, Path(sys.executable), cuda=True)
            print(f"{variant}: CUDA graph in {time.perf_counter() - started:.1f} s", flush=True)
            shutil.copy2(hf / "tokenizer.json", target / "tokenizer.json")
            data = json.loads((args.manifests / variant / "manifest.json").read_text())
            data.update(name=args.name, graph=GENAI_CUDA_GRAPH, files={})
            if scheme is None:
                data["precision"] = "fp16"
            manifest = Manifest.from_json(data)
            manifest.files = describe_files(target, sorted(p.name for p in target.iterdir()))
            write_manifest(target, manifest)
    check = ["--model", args.name, "--contexts", args.contexts, "--json", str(args.json)]
    return gpu_check.main(check + (["--allow-cpu"] if args.allow_cpu else []))


if __name__ == "__main__":
    sys.exit(main())
