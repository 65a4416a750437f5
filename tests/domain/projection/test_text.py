"""The projection's text helpers."""

from __future__ import annotations

from relaystore.domain.projection.text import (
    materialized_content_text,
    provisional_session_title,
    sanitize_terminal_text,
    strip_hidden_prompt_context,
)

# --- text helpers --------------------------------------------------------------------------


def test_provisional_titles_are_bounded_and_cut_at_a_word() -> None:
    assert provisional_session_title("  fix\tthe   build ") == "fix the build"
    long = "word " * 30
    title = provisional_session_title(long)
    assert title is not None
    assert len(title) <= 64
    assert title.endswith("word…")
    assert provisional_session_title("   ") is None


def test_hidden_context_is_stripped_and_an_unterminated_block_hides_everything() -> None:
    assert strip_hidden_prompt_context("<mj-context>secret</mj-context> hello") == "hello"
    assert (
        strip_hidden_prompt_context("<hel-a>x</hel-a><user_shell_command>ls</user_shell_command>hi")
        == "hi"
    )
    assert strip_hidden_prompt_context("<mj-context>secret and more") == ""
    assert strip_hidden_prompt_context("<mj-context") == ""
    assert strip_hidden_prompt_context("<b>bold</b>") == "<b>bold</b>"
    assert strip_hidden_prompt_context("<mj-Upper>x</mj-Upper>y") == "<mj-Upper>x</mj-Upper>y"


def test_terminal_escapes_are_removed_from_text() -> None:
    assert sanitize_terminal_text("\x1b[31mred\x1b[0m\r\nline\rnext\x07") == "red\nline\nnext"
    assert sanitize_terminal_text("\x1b]0;title\x07visible") == "visible"
    assert sanitize_terminal_text("a\x1b(Bb\tc") == "ab\tc"
    assert sanitize_terminal_text("\x1b]unterminated\nrest") == "\nrest"


def test_content_text_reads_every_block_kind() -> None:
    text = materialized_content_text(
        [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "", "mimeType": "image/png"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///a.rs"},
            {"type": "resource", "resource": {"uri": "file:///b", "text": "body"}},
            {"type": "resource", "resource": {"uri": "file:///c", "blob": "AAAA"}},
            "plain",
            {"type": "text", "text": ""},
        ]
    )
    assert text.split("\n") == [
        "hello",
        "[image]",
        "[a.rs](file:///a.rs)",
        "body",
        "[embedded resource: file:///c]",
        "plain",
    ]
