"""What the console's pages show of archived messages, and that templates escape it."""

from __future__ import annotations

import json

from shared.entrypoints.console.render import CONTENT_SECURITY_POLICY, render, static_file
from shared.entrypoints.console.views import BODY_SHOWN_MAX, body_of, session_path


def test_a_json_body_is_pretty_printed_in_its_own_key_order() -> None:
    body = body_of(b'{"b": 1, "a": {"c": "\\u00e9"}}')
    assert (body.kind, body.size, body.cut) == ("JSON", 30, False)
    assert body.text == '{\n  "b": 1,\n  "a": {\n    "c": "é"\n  }\n}'


def test_text_and_binary_bodies_are_shown_as_text_and_hex() -> None:
    assert body_of(b'{"job_id": "x", "pipe').kind == "text"
    binary = body_of(b"\xff\x00A")
    assert (binary.kind, binary.text) == ("binary", "ff 00 41")


def test_bidi_and_other_invisible_characters_in_a_body_are_shown_escaped() -> None:
    body = body_of(json.dumps({"customer_name": "Ada \u202eecilA\u200b"}).encode())
    assert body.text == '{\n  "customer_name": "Ada \\u202eecilA\\u200b"\n}'
    assert body_of("abc\u2067def\u2069 é".encode()).text == "abc\\u2067def\\u2069 é"


def test_a_large_body_is_cut_and_says_so() -> None:
    body = body_of(json.dumps({"rows": "x" * (BODY_SHOWN_MAX + 10)}).encode())
    assert body.cut and len(body.text) == BODY_SHOWN_MAX


def test_session_ids_with_slashes_stay_one_path_segment() -> None:
    assert session_path("/console", "job/7 #1") == "/console/sessions/job%2F7%20%231"


def test_templates_escape_what_they_render() -> None:
    page = render(
        "error.html",
        base="/console",
        operator=None,
        nav="",
        status=404,
        title="<script>alert(1)</script>",
        detail='"><img src=x onerror=alert(1)>',
    )
    assert "<script>alert" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_policy_allows_no_inline_script_or_style_and_the_assets_ship_with_the_app() -> None:
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY
    assert static_file("console.css") and static_file("htmx.min.js")
    assert static_file("../templates/base.html") is None
