"""Every way a text can be written down on its way through a browser, as one pattern.

A secret typed into a page comes back in many spellings: ``encodeURIComponent`` leaves
``~ * ! ' ( )`` as they are, form encoding escapes them and writes a space as ``+``,
Python's ``quote`` keeps ``~`` only, a server may use lower-case hex or encode twice,
HTML escapes ``&`` or any character as a reference, and JSON and JavaScript escape
quotes, backslashes and non-ASCII. Rather than list encoders (and miss the next one),
``any_encoding_of`` matches the value one character at a time, each character in any
of its spellings, so any mixture of them matches too.

What Chromium does to text on its way to the model or a file counts as a spelling too:
it strips and collapses whitespace in titles and the accessibility tree (a run of
spaces, tabs and other control characters becomes one space, the ends go), it writes
``_`` for a character a download's file name may not hold (``"*/:<>?\\|``, control and
format characters, whitespace at the ends) and drops dots at its ends, and a return URL
nested in a query is percent-encoded once more at each level (``%2F``, ``%252F``,
``%25252F``...).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

_HTML_NAMES = {"&": ("amp",), "<": ("lt",), ">": ("gt",), '"': ("quot",),
               "'": ("apos",), "\xa0": ("nbsp",)}
_PERCENT = "%(?:25)*"
"""A ``%``, itself encoded any number of times (a URL nested in a query, nested again)."""
_HIGH_BYTE = f"(?:{_PERCENT}[89A-Fa-f][0-9A-Fa-f])"
_BACKSLASH_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "\b": "b", "\f": "f",
                      "\n": "n", "\r": "r", "\t": "t"}
"""JSON's short escapes, and JavaScript's and Python's ``\\'`` (a ``repr`` writes it)."""


_COLLAPSED = "".join(chr(c) for c in range(0x21) if c != 0x0B) + "\x7f"
"""What Chromium strips and collapses into one space in a title and the accessibility
tree's text: whitespace, and every other control character but the vertical tab."""
_FILE_NAME_REFUSES = '"*/:<>?\\|'
"""What Chromium writes as ``_`` anywhere in a download's file name (besides control
and format characters)."""
MIN_CORE = 3
"""A value's whitespace and dots at the ends may go missing (stripped, trimmed) only
when this much is left: a shorter rest would match ordinary words."""


def _edge(char: str) -> bool:
    return char in _COLLAPSED or char.isspace() or char == "."


def any_encoding_of(value: str) -> str:
    """A regular expression matching ``value`` written in any mixture of the spellings
    of ``char_forms``, a run of whitespace inside it collapsed or not, and its
    whitespace and dots at either end stripped or not (``MIN_CORE``)."""
    start, end = 0, len(value)
    while start < end and _edge(value[start]):
        start += 1
    while end > start and _edge(value[end - 1]):
        end -= 1
    if end - start < MIN_CORE:
        start, end = 0, len(value)
    # Each end: as many of its characters as it has, or fewer (stripped, trimmed).
    parts = [f"{_end_forms(value[:start])}{{0,{start}}}"] if start else []
    i = start
    while i < end:
        char = value[i]
        if char in _COLLAPSED:
            j = i
            while j < end and value[j] in _COLLAPSED:
                j += 1
            parts.append(f"{_whitespace_forms(value[i:j])}+")
            i = j
            continue
        forms = char_forms(char)
        if i == start and char == "~":  # a file name may not begin with one
            forms = f"(?:_|{forms})"
        parts.append(forms)
        i += 1
    if end < len(value):
        parts.append(f"{_end_forms(value[end:])}{{0,{len(value) - end}}}")
    return "".join(parts)


@cache
def _whitespace_forms(run: str) -> str:
    """One character of a collapsed run of whitespace: any of the run's characters or a
    space, in any spelling."""
    return "(?:" + "|".join(char_forms(c) for c in sorted({*run, " "})) + ")"


@cache
def _end_forms(run: str) -> str:
    """One character of the whitespace and dots at either end of a value, stripped,
    collapsed or written as ``_`` (a file name's ends): any of the run's characters, a
    space or ``_``, in any spelling."""
    return "(?:_|" + "|".join(char_forms(c) for c in sorted({*run, " "})) + ")"


@cache
def char_forms(char: str) -> str:
    """A regular expression for one character, as written or: percent-encoded (hex in
    either case, also with the ``%`` itself encoded, any number of times; a non-ASCII
    character as any one to four bytes, since its bytes depend on the page's charset, or
    as a percent-encoded ``&#N;``), ``+`` for a space (and ``%2B``), an HTML character
    reference (decimal, hex or named), a JSON/JS escape, or ``_`` where a download's file
    name may not hold it."""
    code = ord(char)
    forms: list[str] = []
    if char.isascii():
        forms.append(f"{_PERCENT}{_hex_byte(code)}")
    else:
        # A form sends the bytes of its page's charset, whichever that is (UTF-8,
        # windows-1252 on a page that names none, a legacy one): one to four bytes
        # of the upper half, where every such charset puts what ASCII lacks (never an
        # ASCII byte, so the pattern cannot swallow a neighbouring ``%26`` or ``%3D``).
        forms.append(f"{_HIGH_BYTE}{{1,4}}")
        # ... and a character its charset lacks as a percent-encoded reference.
        forms.append(f"{_PERCENT}26{_PERCENT}23{code}{_PERCENT}3[bB]")
    if char == " ":
        forms.append(r"\+")
        forms.append(f"{_PERCENT}2[bB]")  # that ``+`` encoded again, in a nested query
    if char in _FILE_NAME_REFUSES or unicodedata.category(char) in ("Cc", "Cf"):
        forms.append("_")
    forms.append(f"&#0*{code};")
    forms.append(f"&#[xX]0*{_hex_digits(f'{code:x}')};")
    forms.extend(f"&{name};" for name in _HTML_NAMES.get(char, ()))
    if char in _BACKSLASH_ESCAPES:
        forms.append(re.escape("\\" + _BACKSLASH_ESCAPES[char]))
    forms.append("".join(rf"\\u{_hex_digits(f'{unit:04x}')}" for unit in _utf16(code)))
    if code < 0x100:
        forms.append(rf"\\x{_hex_digits(f'{code:02x}')}")
    # The character as written goes last: the longest spelling that fits wins (a ``%``
    # that begins ``%25`` is that encoded ``%``, not a ``%`` followed by ``25``).
    return "(?:" + "|".join([*forms, re.escape(char)]) + ")"


def _hex_byte(byte: int) -> str:
    return _hex_digits(f"{byte:02x}")


def _hex_digits(digits: str) -> str:
    """Hex digits in either case: ``7e`` -> ``7[eE]``."""
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _utf16(code: int) -> list[int]:
    if code < 0x10000:
        return [code]
    code -= 0x10000
    return [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
