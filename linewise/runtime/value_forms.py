"""Every way a text can be written down on its way through a browser, as one pattern.

A secret typed into a page comes back in many spellings: ``encodeURIComponent`` leaves
``~ * ! ' ( )`` as they are, form encoding escapes them and writes a space as ``+``,
Python's ``quote`` keeps ``~`` only, a server may use lower-case hex or encode twice,
HTML escapes ``&`` or any character as a reference, and JSON and JavaScript escape
quotes, backslashes and non-ASCII. Rather than list encoders (and miss the next one),
``any_encoding_of`` matches the value one character at a time, each character in any
of its spellings, so any mixture of them matches too.
"""

from __future__ import annotations

import re
from functools import cache

_HTML_NAMES = {"&": ("amp",), "<": ("lt",), ">": ("gt",), '"': ("quot",),
               "'": ("apos",), "\xa0": ("nbsp",)}
_HIGH_BYTE = "(?:%(?:25)?[89A-Fa-f][0-9A-Fa-f])"
_BACKSLASH_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "\b": "b", "\f": "f",
                      "\n": "n", "\r": "r", "\t": "t"}
"""JSON's short escapes, and JavaScript's and Python's ``\\'`` (a ``repr`` writes it)."""


def any_encoding_of(value: str) -> str:
    """A regular expression matching ``value`` written in any mixture of the spellings
    of ``char_forms``."""
    return "".join(char_forms(c) for c in value)


@cache
def char_forms(char: str) -> str:
    """A regular expression for one character, as written or: percent-encoded (hex in
    either case, also with the ``%`` itself encoded; a non-ASCII character as any one
    to four bytes, since its bytes depend on the page's charset, or as a
    percent-encoded ``&#N;``), ``+`` for a space, an HTML character reference
    (decimal, hex or named), or a JSON/JS escape."""
    code = ord(char)
    forms: list[str] = []
    if char.isascii():
        forms.append(f"%(?:25)?{_hex_byte(code)}")
    else:
        # A form sends the bytes of its page's charset, whichever that is (UTF-8,
        # windows-1252 on a page that names none, a legacy one): one to four bytes
        # of the upper half, where every such charset puts what ASCII lacks (never an
        # ASCII byte, so the pattern cannot swallow a neighbouring ``%26`` or ``%3D``).
        forms.append(f"{_HIGH_BYTE}{{1,4}}")
        # ... and a character its charset lacks as a percent-encoded reference.
        forms.append(f"%26%23{code}%3[bB]")
    if char == " ":
        forms.append(r"\+")
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
