"""Names that exist: which names are offered where the cursor ends an identifier
(lsp_server/prompting/names.py), and which tokens keep the output on one (inference/names.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from inference.names import boost, name_tokens
from inference.vocab_index import VocabIndex
from lsp_server.completion.plan import PipelineOptions, plan_completion
from lsp_server.config.settings import Settings
from lsp_server.prompting.names import index_names, name_rests, word_before
from lsp_server.workspace.index import WorkspaceIndex
from lsp_server.workspace.snippet import Snippet

VOCAB = ["con", "fig", "config", "conf", "ig", "igure", "(", " (", ".", "x", "_", "ure", "u", "é"]


class Texts:
    """A tokenizer's vocabulary, which is all VocabIndex reads."""

    def vocab_texts(self) -> list[str]:
        return list(VOCAB)


@pytest.fixture(scope="module")
def index() -> VocabIndex:
    return VocabIndex(Texts())  # type: ignore[arg-type]


def texts(ids: np.ndarray | None) -> set[str]:
    assert ids is not None
    return {VOCAB[i] for i in ids}


def test_tokens_that_keep_to_a_known_name(index: VocabIndex) -> None:
    # Typed "conf"; the file knows "config" and "configure": rests "ig", "igure".
    assert texts(name_tokens(index, "", "", ("ig", "igure"))) == {"ig", "igure"}
    # Only "config" known: "igure" would spell a name nobody has.
    assert texts(name_tokens(index, "", "", ("ig",))) == {"ig"}
    # After "ig", "config" is complete (it may end) and "configure" goes on.
    after = texts(name_tokens(index, "", "ig", ("ig", "igure")))
    assert after == {"(", " (", ".", "u", "ure"}


def test_healed_text_comes_first(index: VocabIndex) -> None:
    # Healing backed off "conf": the output must spell it again, then a name's rest.
    assert texts(name_tokens(index, "conf", "", ("ig",))) == {"con", "conf", "config"}
    assert texts(name_tokens(index, "conf", "con", ("ig",))) == {"fig"}


def test_the_model_is_free_after_the_name_or_off_every_name(index: VocabIndex) -> None:
    assert name_tokens(index, "", "ig(", ("ig",)) is None  # the identifier has ended
    assert name_tokens(index, "", "x", ("ig", "igure")) is None  # a name no one has: free
    assert name_tokens(index, "", "", ()) is None


def test_boost_adds_to_the_named_tokens_only() -> None:
    logits = np.zeros(4, dtype=np.float32)
    out = boost(logits, np.array([1, 3]), 4.0)
    assert out.tolist() == [0.0, 4.0, 0.0, 4.0] and logits.tolist() == [0.0] * 4


def test_word_before_the_cursor() -> None:
    assert word_before("    self.conf", "") == "conf"
    assert word_before("x = größe", ")") == "größe"
    assert word_before("call(", "") == ""
    assert word_before("con", "fig = 1") == ""  # inside a word: the rest is already written


def test_rests_come_from_the_file_snippets_language_and_repository() -> None:
    around = "config = load()\nconfigure(config)\n"
    snippets = [Snippet("a.py", "def confirm(): ...")]
    rests = name_rests(
        "conf", around, "python", snippets, repo_names=lambda p: ["conflict"] if p else []
    )
    assert rests == ("ig", "igure", "irm", "lict")
    assert name_rests("Fal", "", "python") == ("se",)  # the language's own names
    assert name_rests("nothing_known", around, "python") == ()


def test_the_identifier_being_typed_is_not_a_known_name() -> None:
    text = "value = 1\nprint(valu"
    plan = plan_completion(text, 1, 10, Settings(), language_id="python")
    assert plan.config.name_rests == ("e",)  # "valu" itself is not offered as complete
    off = plan_completion(
        text, 1, 10, Settings(), language_id="python", options=PipelineOptions(names=False)
    )
    assert off.config.name_rests == ()
    unset = plan_completion(text, 1, 10, Settings(knownNames=False), language_id="python")
    assert unset.config.name_rests == ()


def test_too_many_names_say_nothing() -> None:
    around = "\n".join(f"a{i} = {i}" for i in range(200))
    assert name_rests("a", around, "python") == ()


def test_index_names_leave_out_the_file_being_edited(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def configure():\n    pass\n")
    (tmp_path / "b.py").write_text("class Config:\n    pass\ndef conflict(): pass\n")
    workspace = WorkspaceIndex(tmp_path, None)
    workspace.build()
    names = index_names(workspace, "b.py")
    assert list(names("conf")) == ["configure"]
    assert list(index_names(workspace, None)("conf")) == ["configure", "conflict"]


def test_decode_loop_keeps_to_the_name_then_goes_free(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import inference.generate as generate
    from inference.generate import Generation, GenerationConfig
    from inference.model import load_model_dir

    # A huge bonus makes the soft preference a rule, so a random model must spell the name.
    monkeypatch.setattr(generate, "NAMES_BONUS_LOGITS", 1e6)
    model = load_model_dir(tiny_model / "fast")
    prompt = model.tokenizer.encode("settings = load()\nprint(conf")
    free = Generation(model, prompt, GenerationConfig(max_new_tokens=12)).run()
    named = Generation(
        model, prompt, GenerationConfig(max_new_tokens=12, name_rests=("igure_zebra",))
    ).run()
    assert not free.text.startswith("igure_zebra")
    assert named.text.startswith("igure_zebra"), named.text
