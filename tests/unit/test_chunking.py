from __future__ import annotations

import base64
import hashlib
import itertools

import pytest

from stores.chunking import chunk_text, split_sections
from stores.errors import InputError
from stores.text import content_hash, count_tokens, detect_language, split_sentences


def test_sections_follow_headings_and_nesting() -> None:
    text = "Intro line.\n\n# A\n\nbody a\n\n## A1\n\nbody a1\n\n# B\n\nbody b\n"
    sections = split_sections(text)
    assert [s for s, _ in sections] == ["", "A", "A > A1", "B"]
    assert sections[2][1] == "body a1"


def test_headings_inside_code_fences_are_not_sections() -> None:
    text = "# Real\n\n```\n# not a heading\n```\n\ntext"
    assert [s for s, _ in split_sections(text)] == ["Real"]


def test_chunks_respect_size_and_keep_positions() -> None:
    para = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(40))
    text = "# One\n\n" + "\n\n".join([para] * 6) + "\n\n# Two\n\nShort closing section."
    chunks = chunk_text(text, chunk_size=200, chunk_overlap=40)
    assert len(chunks) > 6
    assert [c.position for c in chunks] == list(range(len(chunks)))
    assert [c.chunk_id for c in chunks] == [f"c{i}" for i in range(len(chunks))]
    assert all(count_tokens(c.text) <= 200 for c in chunks)
    assert chunks[-1].section == "Two"
    assert all(c.section == "One" for c in chunks[:-1])


def test_consecutive_chunks_overlap_within_a_section() -> None:
    sentences = [f"Fact {i} is that item {i} weighs {i * 3} kilograms." for i in range(60)]
    chunks = chunk_text(" ".join(sentences), chunk_size=120, chunk_overlap=30)
    assert len(chunks) >= 3
    for left, right in itertools.pairwise(chunks):
        last_sentence = split_sentences(left.text)[-1]
        assert last_sentence in right.text


def test_no_overlap_across_sections() -> None:
    text = "# A\n\n" + "Alpha sentence here. " * 30 + "\n\n# B\n\nBeta only."
    chunks = chunk_text(text, chunk_size=60, chunk_overlap=20)
    assert chunks[-1].text == "Beta only."


def test_chinese_text_is_split_on_chinese_punctuation() -> None:
    text = "第一句话很长。" * 80 + "最后一句！"
    chunks = chunk_text(text, chunk_size=100, chunk_overlap=10)
    assert len(chunks) > 3
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert split_sentences("你好。再见！好吗？") == ["你好。", "再见！", "好吗？"]
    assert detect_language(text) == "zh"
    assert detect_language("plain english words") == "en"


def test_a_giant_sentence_is_hard_split() -> None:
    text = "word " * 2000
    chunks = chunk_text(text, chunk_size=100, chunk_overlap=0)
    assert all(count_tokens(c.text) <= 100 for c in chunks)
    assert sum(len(c.text.split()) for c in chunks) == 2000


def _blobs(size: int) -> dict[str, str]:
    """Texts without spaces as documents carry them: a run of one letter, base64, a hex dump, minified code."""
    raw = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(size // 32 + 1))[:size]
    return {
        "letters": "x" * size,
        "base64": base64.b64encode(raw).decode(),
        "hex": raw.hex(),
        "minified": ("function f(a,b){return a*b+Math.max(a,b)};var q=[1,2,3].map(f);" * (size // 60 + 1))[:size],
    }


def test_text_without_spaces_counts_at_least_a_token_per_three_characters() -> None:
    assert count_tokens("x" * 3_000_000) >= 1_000_000
    for name, blob in _blobs(30_000).items():
        assert count_tokens(blob) >= len(blob) / 3, name
    # English prose is counted as before: about 1.3 tokens a word, whatever the length of the text.
    prose = "The committee approved a budget of forty thousand euros in March. " * 50
    assert count_tokens(prose) == pytest.approx(1.3 * len(prose.replace(".", " .").split()), abs=1)


@pytest.mark.parametrize("size", [100, 900])
def test_text_without_spaces_is_cut_by_characters_within_the_chunk_size(size: int) -> None:
    for name, blob in _blobs(60_000).items():
        chunks = chunk_text(blob, chunk_size=size, chunk_overlap=0)
        assert len(chunks) > 1, name
        assert all(count_tokens(c.text) <= size for c in chunks), name
        assert all(len(c.text) <= 3 * size + 16 for c in chunks), name
        assert "".join(c.text for c in chunks).replace(" ", "") == blob.replace(" ", ""), name


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(InputError):
        chunk_text("x", chunk_size=10)
    with pytest.raises(InputError):
        chunk_text("x", chunk_size=100, chunk_overlap=100)


def test_content_hash_ignores_whitespace_changes() -> None:
    assert content_hash("a  b\n c") == content_hash("a b c")
    assert content_hash("a b c") != content_hash("a b d")


def test_effective_overlap_shrinks_with_small_chunks() -> None:
    from stores.chunking import effective_overlap

    assert effective_overlap(900, 150) == 150
    assert effective_overlap(120, 150) == 20
    with pytest.raises(InputError):
        effective_overlap(100, -1)
