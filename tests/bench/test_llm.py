"""`voicecli bench llm` on a scripted LLM: what it times, how it scores, which variants it runs, what it reports."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes.llm import Reply, ScriptedLLM
from voicecli.bench.llm import (
    BY_NAME,
    FIRST_SENTENCE,
    VARIANTS,
    Answer,
    Question,
    ask,
    build_result,
    choose_variants,
    describe,
    questions_from,
    render_markdown,
    sample,
    summary_by_variant,
    variant_config,
)
from voicecli.bench.question_sets import HOLDOUT, QUALITY
from voicecli.bench.target import BenchError
from voicecli.config import Config

CONFIG = Config.defaults()


def ticking(step_s: float = 0.1) -> Callable[[], float]:
    """A clock that advances `step_s` every time it is read: the request, each delta, the end."""
    ticks: Iterator[int] = iter(range(1_000_000))
    return lambda: next(ticks) * step_s


def args(**changes: object) -> argparse.Namespace:
    values: dict[str, object] = {"question_set": None, "default_set": "quality", "questions": None,
                                 "variants": None, "out": "results/bench", "name": None}
    values.update(changes)
    return argparse.Namespace(**values)


async def test_times_the_first_token_the_first_sentence_and_the_decode_rate() -> None:
    llm = ScriptedLLM(Reply(["The capital", " of Spain is Madrid.", " It is", " in the centre."]))
    answer = await ask(llm, "What is the capital of Spain?", CONFIG.llm, CONFIG.segmentation, clock=ticking())
    # clock reads: request 0.0, deltas 0.1 0.2 0.3 0.4, end 0.5
    assert answer.text == "The capital of Spain is Madrid. It is in the centre."
    assert answer.ttft_ms == pytest.approx(100)
    # Cut as the pipeline cuts it: the first phrase leaves before "is" once the word after it has arrived (0.2 s).
    assert answer.first_sentence == "The capital of Spain"
    assert answer.first_sentence_ms == pytest.approx(200)
    assert answer.total_ms == pytest.approx(500)
    assert answer.tokens == 4
    assert answer.tokens_per_s == pytest.approx(3 / 0.3)
    call = llm.calls[0]
    assert [m.content for m in call.messages] == ["What is the capital of Spain?"]  # one fresh turn
    assert (call.system, call.max_tokens, call.temperature) == (
        CONFIG.llm.system_prompt, CONFIG.llm.max_tokens, CONFIG.llm.temperature)


async def test_questions_asked_within_a_conversation_see_the_earlier_turns() -> None:
    from voicecli.llm.history import Conversation

    llm = ScriptedLLM(Reply(["Madrid."]), Reply(["Eight."]))
    history = Conversation(max_turns=8)
    await ask(llm, "What is the capital of Spain?", CONFIG.llm, CONFIG.segmentation, clock=ticking(),
              history=history)
    await ask(llm, "How many legs does a spider have?", CONFIG.llm, CONFIG.segmentation, clock=ticking(),
              history=history)
    assert [m.content for m in llm.calls[1].messages] == [
        "What is the capital of Spain?", "Madrid.", "How many legs does a spider have?"]
    assert [m.content for m in history.messages()][-2:] == ["How many legs does a spider have?", "Eight."]


async def test_a_one_sentence_answer_is_first_spoken_at_its_end() -> None:
    llm = ScriptedLLM(Reply(["Madrid."]))
    answer = await ask(llm, "q", CONFIG.llm, CONFIG.segmentation, clock=ticking())
    assert answer.first_sentence == "Madrid."
    assert answer.first_sentence_ms == pytest.approx(200)  # the end of the stream, not the only token
    assert answer.tokens_per_s is None  # one token: no decode rate


async def test_an_empty_answer_reaches_no_token() -> None:
    answer = await ask(ScriptedLLM(Reply([])), "q", CONFIG.llm, CONFIG.segmentation, clock=ticking())
    assert (answer.text, answer.ttft_ms, answer.first_sentence_ms, answer.tokens) == ("", None, None, 0)


def answer(text: str, first_sentence_ms: float = 300.0) -> Answer:
    return Answer(text, 100.0, first_sentence_ms, text, 900.0, 10, 20.0, "end_turn")


def test_scores_each_answer_and_sums_per_variant() -> None:
    spain = Question("q00", "What is the capital of Spain?", ("madrid",))
    open_question = Question("q01", "Name a large animal.", ())
    samples = [
        sample("a", 0, spain, answer("It is Madrid.", 200)),
        sample("a", 1, open_question, answer("An elephant.", 400)),
        sample("b", 0, spain, answer("I don't know.", 300)),
        sample("b", 1, open_question, answer("A whale.", 500)),
    ]
    assert [s.detail["right"] for s in samples] == [True, None, False, None]
    summary = summary_by_variant(samples, ["a", "b"])
    assert summary["a"]["questions"] == 2
    assert (summary["a"]["answers_right"], summary["a"]["answers_scored"]) == (1, 1)
    assert (summary["b"]["answers_right"], summary["b"]["answers_scored"]) == (0, 1)
    assert summary["a"]["first_sentence_p50_ms"] == pytest.approx(300)
    assert summary["b"]["ttft_p50_ms"] == pytest.approx(100)
    assert summary["a"]["tokens_per_s_p50"] == pytest.approx(20)


def test_a_variant_is_the_users_config_with_the_local_model_and_its_settings() -> None:
    user = Config.load(env={"VOICECLI_LLM__BACKEND": "bedrock", "VOICECLI_LLM__LOCAL__MODEL_FILE": "x.gguf",
                            "VOICECLI_LLM__MAX_TOKENS": "99"})
    derived = variant_config(user, BY_NAME["gemma3-270m-t0"])
    assert derived.llm.backend == "local"
    assert (derived.llm.local.model, derived.llm.local.model_file) == ("gemma3-270m", "")
    assert derived.llm.temperature == 0.0
    assert derived.llm.max_tokens == 99  # what the variant does not set stays the user's
    configured = variant_config(user, BY_NAME["configured"])
    assert configured.llm.local.model_file == "x.gguf"  # the user's own model file, as it is


def test_variants_default_to_the_installed_ones() -> None:
    only_smollm2 = choose_variants(None, CONFIG, lambda c: c.llm.local.model == "smollm2")
    assert [v.name for v in only_smollm2] == [v.name for v in VARIANTS if v.model in ("smollm2", "")]
    with pytest.raises(BenchError, match="models install --only smollm2"):
        choose_variants(None, CONFIG, lambda c: False)


def test_named_variants_must_exist_and_be_installed() -> None:
    chosen = choose_variants("smollm2-before, configured", CONFIG, lambda c: True)
    assert [v.name for v in chosen] == ["smollm2-before", "configured"]
    with pytest.raises(BenchError, match="unknown nope"):
        choose_variants("smollm2-t0,nope", CONFIG, lambda c: True)
    with pytest.raises(BenchError, match="install --only gemma3-270m"):
        choose_variants("gemma3-270m-t0", CONFIG, lambda c: c.llm.local.model != "gemma3-270m")


def test_questions_come_from_a_built_in_set() -> None:
    source, quality = questions_from(args())
    assert source == "quality"
    assert [(q.text, q.answers) for q in quality] == [(s.text, s.answers) for s in QUALITY]
    source, holdout = questions_from(args(question_set="holdout"))
    assert source == "holdout" and len(holdout) == len(HOLDOUT)


def test_questions_come_from_a_manifest(tmp_path: Path) -> None:
    (tmp_path / "a.wav").write_bytes(b"")
    (tmp_path / "questions.json").write_text(json.dumps(
        {"questions": [{"file": "a.wav", "text": "What is the capital of Peru?", "answers": ["lima"]}]}))
    source, questions = questions_from(args(questions=str(tmp_path)))
    assert source == str(tmp_path)
    assert questions == [Question("a.wav", "What is the capital of Peru?", ("lima",))]
    (tmp_path / "questions.json").unlink()
    with pytest.raises(BenchError, match=r"no questions\.json"):
        questions_from(args(questions=str(tmp_path)))


def test_the_report_lists_every_answer_per_variant() -> None:
    spain = Question("q00", "What is the capital of Spain?", ("madrid",))
    variants = [BY_NAME["smollm2-before"], BY_NAME["smollm2-t0"]]
    described = [describe(v, variant_config(CONFIG, v)) for v in variants]
    samples = [sample("smollm2-before", 0, spain, answer("Madrid | the capital.")),
               sample("smollm2-t0", 0, spain, answer("Paris."))]
    result = build_result("llm-test", "quality", [spain], described, samples, CONFIG, {})
    body = result.to_json()
    assert body["summary_by_variant"]["smollm2-before"]["answers_right"] == 1
    assert body["settings"]["tuned_on"] is True
    assert {row["metric"] for row in body["summary"]} >= {FIRST_SENTENCE.key}
    markdown = render_markdown(result)
    assert "| smollm2-before | 1/1 |" in markdown and "| smollm2-t0 | 0/1 |" in markdown
    assert "✓ Madrid \\| the capital." in markdown and "✗ Paris." in markdown
    assert "throwaway question before timing" in markdown
