"""Redaction against what a real Chromium writes: for any value (``~ * ! ' ( )``,
spaces, quotes, ampersands, non-ASCII, astral characters), every spelling the browser
produces — ``encodeURIComponent``, form encoding (``URLSearchParams`` and a real GET
form submission), HTML serialization of text and attributes, ``JSON.stringify`` — is
replaced whole by the placeholder, also inside other text."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from playwright.sync_api import Page, sync_playwright

from linewise.runtime.browser.chromium import find_chromium
from linewise.runtime.redaction import Redactor
from tests.support.sites import Site

PLACEHOLDER = "<secret:v>"

ENCODE = """(v) => {
  const p = document.createElement("p");
  p.textContent = v;
  p.setAttribute("title", v);
  return [encodeURIComponent(v), encodeURI(v), new URLSearchParams({q: v}).toString().slice(2),
          JSON.stringify(v).slice(1, -1), p.outerHTML, escape(v)];
}"""
"""The spellings Chromium gives a value (``escape`` is the legacy ``%uXXXX`` one)."""

SPECIAL = "~*!'() \"&<>+%/\\?#=;:@$,\t\n"

values = st.text(
    alphabet=st.one_of(st.sampled_from(SPECIAL), st.characters(codec="utf-8")),
    min_size=3, max_size=24,
).filter(lambda v: v.strip() == v and len(v.strip()) >= 3)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Page]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium())
        page = browser.new_page()
        page.set_content("<p>encodings</p>")
        yield page
        browser.close()


def redacted(value: str, text: str) -> str:
    redactor = Redactor()
    redactor.add(value, PLACEHOLDER)
    return redactor.text(text)


def assert_every_form_redacted(value: str, forms: list[str]) -> None:
    for form in forms:
        text = f"URL: /echo?q={form}&next=1"
        assert redacted(value, text) == f"URL: /echo?q={PLACEHOLDER}&next=1", form


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_every_spelling_chromium_writes_is_redacted(chromium: Page, value: str) -> None:
    uri, full_uri, form, json_text, html, legacy = chromium.evaluate(ENCODE, value)
    assert_every_form_redacted(value, [value, uri, full_uri, form, json_text,
                                       quote(value, safe=""), quote_plus(value)])
    # Serialized HTML: the text and the attribute, each escaped its own way.
    text_html = html.split(">", 1)[1].rsplit("<", 1)[0]
    attribute = html.split('title="', 1)[1].split('"', 1)[0]
    for form in (text_html, attribute):
        assert PLACEHOLDER in redacted(value, form) and value not in redacted(value, form)
    if value.isascii():  # escape() writes %uXXXX beyond Latin-1, a spelling nobody sends
        assert_every_form_redacted(value, [legacy])


@pytest.mark.parametrize("value", ["S3cr~t*P@ss! w0rd", "pa55-Wörd!x7\"q (ok)", "a+b c&d=e"])
def test_a_real_form_submission_is_redacted(chromium: Page, value: str) -> None:
    site = Site({"/echo": (200, {}, "<p>echo</p>")})
    try:
        chromium.set_content(
            f"<form action='http://127.0.0.1:{site.port}/echo' method='get'>"
            "<input name='q'><input name='x' value='1'><button>Go</button></form>"
        )
        chromium.fill("input[name=q]", value)
        with chromium.expect_navigation():
            chromium.click("button")
        [path] = [p for p in site.hits if p.startswith("/echo")]
    finally:
        site.close()
    assert redacted(value, chromium.url) == f"http://127.0.0.1:{site.port}/echo?q={PLACEHOLDER}&x=1"
    assert redacted(value, path) == f"/echo?q={PLACEHOLDER}&x=1"


def test_the_issue_spelling_and_mixed_spellings() -> None:
    value = "S3cr~t*P@ss! w0rd"
    for form in ["S3cr%7Et*P%40ss%21+w0rd", "S3cr%7et*P%2540ss%21%20w0rd",
                 "S3cr~t*P&#64;ss&#x21; w0rd", "S3cr\\u007et*P@ss! w0rd"]:
        assert redacted(value, f"q={form}") == f"q={PLACEHOLDER}", form


def test_short_values_are_redacted_only_standing_alone() -> None:
    redactor = Redactor()
    redactor.add("ab", PLACEHOLDER)
    assert redactor.text("a cab") == "a cab"
    assert redactor.argv(["--x", "ab"]) == ["--x", PLACEHOLDER]
    assert redactor.is_sensitive("%61b")


@pytest.mark.parametrize("charset", ["utf-8", "windows-1252", "iso-8859-5", "koi8-r"])
def test_a_form_in_any_charset_is_redacted(chromium: Page, charset: str) -> None:
    value = "Wörd €5 Жж ok"
    form = "<form action='/echo'><input name='q'><button>Go</button></form>"
    site = Site({"/echo": (200, {}, "<p>echo</p>"),
                 "/form": (200, {"Content-Type": f"text/html; charset={charset}"}, form)})
    try:
        chromium.goto(f"http://127.0.0.1:{site.port}/form")
        chromium.fill("input[name=q]", value)
        with chromium.expect_navigation():
            chromium.click("button")
    finally:
        site.close()
    assert redacted(value, chromium.url).endswith(f"/echo?q={PLACEHOLDER}"), chromium.url
