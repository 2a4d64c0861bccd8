"""The show-or-stay-quiet gate: labels from what the person does next, learning, its file."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from inference.engine import EngineConfig
from lsp_server.config.tuning import GATE_REFIT_LABELS
from lsp_server.inline import show_gate
from lsp_server.inline.show_gate import FEATURES, Put, ShowGate, features, gate_file, outcome
from lsp_server.service import CompletionService

BEFORE, AFTER = "def f(x):\n    return ", "\n\nprint(1)\n"


def _put(text: str, held: bool = False, mean: float = -0.5) -> Put:
    x = features(text, (mean, mean), "    return ", "", "python", False)
    return Put(BEFORE, AFTER, text, x, held)


def test_what_the_person_does_next_says_taken_or_passed() -> None:
    put = _put("x + 1")
    assert outcome(put, BEFORE + "x +" + AFTER) is None  # still typing it
    assert outcome(put, BEFORE + "x + 1" + AFTER) is True  # typed to the end
    assert outcome(put, BEFORE + "x + 1  # ü" + AFTER) is True
    assert outcome(put, BEFORE + "x * 2" + AFTER) is False  # typed something else
    assert outcome(put, BEFORE + AFTER.replace("print", "log")) is False  # worked elsewhere
    block = Put(BEFORE, AFTER, "x\nprint(x)", put.x, False)
    assert outcome(block, BEFORE + "x\nreturn" + AFTER) is True  # its first line was kept


def test_the_features_read_the_model_and_the_place() -> None:
    x = dict(
        zip(
            FEATURES,
            features("néw_name()", (-0.1, -3.0), "    obj.", "", "python", True),
            strict=True,
        )
    )
    assert x["mean_logprob"] == pytest.approx(-1.55) and x["least_logprob"] == -3.0
    assert x["first_logprob"] == -0.1 and x["prefetch"] == 1.0 and x["lang_python"] == 1.0
    assert x["mid_line"] == 0.0 and x["line_start"] == 0.0 and x["no_logprobs"] == 0.0
    cached = dict(zip(FEATURES, features("a", (), "", "b)", "lua", False), strict=True))
    assert cached["no_logprobs"] == 1.0 and cached["mid_line"] == 1.0 and cached["line_start"]


def test_held_back_suggestions_are_labelled_too_and_counted() -> None:
    gate = ShowGate()
    gate.put("u", _put("x + 1", held=True))
    gate.put("u", _put("x + 1", held=True))  # asked again at the same place: once
    gate.observe("u", BEFORE + "x + 1" + AFTER)  # the person typed it anyway
    gate.put("u", _put("y", held=False))
    gate.taken("u", "y")  # accepted
    gate.put("u", _put("z", held=False))
    gate.observe("u", BEFORE + "q" + AFTER)
    assert gate.stats() == {
        "heldBack": 1,
        "heldBackTaken": 1,
        "shownTaken": 1,
        "shownPassed": 1,
        "labels": 3,
    }


def test_it_learns_what_this_person_passes_over_and_keeps_it(tmp_path: Path) -> None:
    path = gate_file(tmp_path, tmp_path / "workspace")
    gate = ShowGate()
    gate.use(path)
    unsure, sure = _put("maybe()", mean=-4.0), _put("sure()", mean=-0.2)
    before = gate.probability(unsure.x), gate.probability(sure.x)
    for i in range(3 * GATE_REFIT_LABELS):
        gate.put("u", _put(f"a{i}", mean=-4.0))
        gate.observe("u", BEFORE + "other" + AFTER)  # the unsure ones are passed over
        gate.put("u", _put(f"b{i}", mean=-0.2))
        gate.observe("u", BEFORE + f"b{i}" + AFTER)  # the sure ones typed
    gate.flush()  # the refit runs on a thread of its own
    after = gate.probability(unsure.x), gate.probability(sure.x)
    assert after[1] > before[1] + 0.1  # this person takes the sure ones: more are shown
    assert after[0] < after[1] / 5  # and not the unsure ones
    saved = json.loads(path.read_text())
    assert saved["features"] == list(FEATURES) and len(saved["samples"]) == 6 * GATE_REFIT_LABELS
    again = ShowGate()
    again.use(path)  # the next session in this workspace starts from what was learned
    assert again.probability(unsure.x) == pytest.approx(after[0], abs=1e-4)
    other = ShowGate()
    other.use(gate_file(tmp_path, tmp_path / "elsewhere"))  # another workspace: the seed
    assert other.probability(unsure.x) == pytest.approx(before[0])


def test_the_file_holds_the_newest_refit_when_two_saves_overlap(tmp_path: Path) -> None:
    """On a busy machine an older refit's save can be overtaken by a newer refit's between reading
    the gate and writing the file: the file must still end with the weights in memory."""
    path = tmp_path / "gate.json"
    gate = ShowGate()
    gate.use(path)
    older_waiting, newer_saved = threading.Event(), threading.Event()

    class OvertakenLock:  # the file's lock, which the older refit's save reaches last
        def __init__(self) -> None:
            self.lock = threading.Lock()

        def __enter__(self) -> None:
            if threading.current_thread().name == "older":
                older_waiting.set()
                newer_saved.wait(timeout=30)
            self.lock.acquire()

        def __exit__(self, *exc: object) -> None:
            self.lock.release()

    gate._write_lock = OvertakenLock()  # type: ignore[assignment]
    passed = [(_put(f"a{i}", mean=-4.0).x, 0) for i in range(GATE_REFIT_LABELS)]
    taken = [(_put(f"b{i}", mean=-0.2).x, 1) for i in range(GATE_REFIT_LABELS)]
    older = threading.Thread(target=gate._refit, args=(passed, 1), name="older")
    older.start()
    assert older_waiting.wait(timeout=30)
    gate._refit(passed + taken, 2)  # the newer refit, on more labels, saves first
    newer_saved.set()
    older.join()
    assert json.loads(path.read_text())["weights"] == [round(float(w), 6) for w in gate.weights]
    again = ShowGate()
    again.use(path)
    assert np.allclose(again.weights, gate.weights, atol=1e-6)


def test_a_refit_under_way_stays_with_its_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    gate = ShowGate()
    gate.use(first)
    fitting, switched = threading.Event(), threading.Event()
    real_fit = show_gate.fit

    def slow_fit(*args: object, **kwargs: object) -> np.ndarray:
        fitting.set()
        switched.wait(timeout=30)
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(show_gate, "fit", slow_fit)
    for i in range(GATE_REFIT_LABELS):
        gate.put("u", _put(f"b{i}", mean=-0.2))
        gate.observe("u", BEFORE + f"b{i}" + AFTER)
    assert fitting.wait(timeout=30)
    gate.use(second)  # another workspace while the first one's refit runs
    switched.set()
    gate.flush()
    assert np.array_equal(gate.weights, show_gate.seed_weights())
    assert not second.exists()


def test_an_unreadable_or_outdated_file_starts_from_the_seed(tmp_path: Path) -> None:
    seed = ShowGate().weights
    path = tmp_path / "gate.json"
    for content in ("{not json", json.dumps({"version": 1, "features": ["bias"], "weights": [9]})):
        path.write_text(content)
        gate = ShowGate()
        gate.use(path)
        assert np.array_equal(gate.weights, seed) and gate.stats()["labels"] == 0
    bad = {"version": 1, "features": list(FEATURES), "weights": [1.0], "samples": []}
    path.write_text(json.dumps(bad))
    gate = ShowGate()
    gate.use(path)
    assert np.array_equal(gate.weights, seed)


@pytest.fixture
def service(real_model: Path) -> CompletionService:
    config = EngineConfig(
        fast_dir=real_model / "fast", standard_dir=real_model / "standard", cache_dir=None
    )
    svc = CompletionService(lambda message, level: None, config)
    svc.apply_settings({"debounceMs": 0, "maxTokens": 8, "prefetch": False})
    return svc


async def test_the_server_holds_back_below_the_threshold_and_answers_when_asked(
    service: CompletionService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FASTCOMPLETE_HOME", str(tmp_path))
    service.use_workspace(tmp_path)
    await service.load_models()
    uri = "file:///w/calc.py"
    service.open(
        uri, "import math\n\n\ndef hypot(a, b):\n    return math.sqrt(a * a + b * b", 1, "python"
    )
    service.apply_settings({"showGateThreshold": 1.0})  # nothing is likely enough
    assert await service.complete(uri, 4, 34) is None
    stats = service.stats()
    assert stats["server"]["held_back"] == 1 and stats["gate"]["heldBack"] == 1
    assert stats["emptyReasons"]["held_back"] == 1
    assert await service.complete(uri, 4, 34, invoked=True) is not None  # asked for: answered
    service.apply_settings({"showGate": False})
    shown = await service.complete(uri, 4, 34)
    assert shown is not None and service.stats()["gate"]["heldBack"] == 1
    assert shown.result.logprobs and all(p <= 0 for p in shown.result.logprobs)
    service.close(uri)
    assert gate_file(tmp_path, tmp_path).exists()  # kept per workspace under the home


def test_the_threshold_setting_is_checked(service: CompletionService) -> None:
    told: list[str] = []
    service.notices.tell = lambda message, level="warning": told.append(message)  # type: ignore[method-assign]
    service.apply_settings({"showGateThreshold": 2})
    assert service.settings.showGateThreshold != 2
    assert any("showGateThreshold" in m for m in told)


def test_a_rest_being_typed_through_is_judged_by_its_own_tokens() -> None:
    from lsp_server.inline.show_gate import rest_logprobs

    probs = (-0.1, -0.2, -5.0, -6.0)  # sure of the start, not of the end
    assert rest_logprobs(probs, 0, len("abcdefgh")) == probs
    assert rest_logprobs(probs, 4, len("efgh")) == (-5.0, -6.0)
    assert rest_logprobs(probs, 7, len("h")) == (-6.0,)
    assert rest_logprobs((), 4, len("efgh")) == ()
