from __future__ import annotations

import pytest

import prompts


def test_every_prompt_renders_with_its_placeholders() -> None:
    templates = prompts.all_templates()
    for name, lang in templates:
        names = prompts.placeholders(name, lang)
        text = prompts.render(name, lang, **{n: f"<{n}>" for n in names})
        assert "$" not in text, (name, lang)  # every placeholder filled: nothing of the template syntax left
        for n in names:
            assert f"<{n}>" in text
        if names:
            missing = sorted(names)[0]
            with pytest.raises(KeyError):
                prompts.render(name, lang, **{n: "x" for n in names if n != missing})


def test_chinese_prompts_have_english_counterparts() -> None:
    templates = set(prompts.all_templates())
    for name, lang in templates:
        if lang == "zh":
            assert (name, "en") in templates
            assert prompts.placeholders(name, "zh") == prompts.placeholders(name, "en")


def test_unknown_template_is_an_error() -> None:
    with pytest.raises(FileNotFoundError):
        prompts.render("no/such/prompt")
