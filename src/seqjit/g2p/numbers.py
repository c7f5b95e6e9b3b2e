"""Numbers read aloud, in English words, for sentence mode (:mod:`seqjit.g2p.text`).

    spoken("1984")    -> ['nineteen', 'eighty', 'four']          (a year: 4 digits, 1100-2099)
    spoken("3rd")     -> ['third']
    spoken("1,250")   -> ['one', 'thousand', 'two', 'hundred', 'and', 'fifty']
    spoken("$2.50")   -> ['two', 'dollars', 'and', 'fifty', 'cents']
    spoken("50%")     -> ['fifty', 'percent']

The words come from num2words (an optional extra: ``pip install 'seqjit[text]'``), split at its
spaces, hyphens and commas ("eighty-four" is two words to pronounce); currency amounts are composed
here (num2words reads a whole number of dollars as cents).
"""
from __future__ import annotations

import re
from decimal import Decimal

#: symbol -> (unit, units, subunit, subunits)
CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "£": ("pound", "pounds", "penny", "pence"),
              "€": ("euro", "euros", "cent", "cents")}
ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)", re.IGNORECASE)
AMOUNT = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
YEARS = (1100, 2099)


def _num2words():
    try:
        from num2words import num2words
    except ModuleNotFoundError:
        raise ModuleNotFoundError("reading numbers aloud needs the num2words package: pip install 'seqjit[text]'") \
            from None
    return num2words


def _split(phrase: str) -> list:
    return [w for w in re.split(r"[\s,\-]+", phrase) if w]


def cardinal(number) -> list:
    """``number`` (an int or a Decimal) as words: 1250 -> one thousand two hundred and fifty."""
    return _split(_num2words()(number))


def spoken(token: str) -> list:
    """The words read aloud for a number token (see the module's examples); ValueError if it is none."""
    n2w = _num2words()
    if token[:1] in CURRENCIES:
        return currency(token[0], token[1:].strip())
    if token.endswith("%"):
        return spoken(token[:-1]) + ["percent"]
    m = ORDINAL.fullmatch(token)
    if m:
        return _split(n2w(int(m.group(1)), to="ordinal"))
    if not AMOUNT.fullmatch(token):
        raise ValueError(f"not a number: {token!r}")
    digits = token.replace(",", "")
    if "," not in token and "." not in token and len(digits) == 4 and YEARS[0] <= int(digits) <= YEARS[1]:
        return _split(n2w(int(digits), to="year"))
    return cardinal(Decimal(digits) if "." in digits else int(digits))


def currency(symbol: str, amount: str) -> list:
    """``$2.50`` -> two dollars and fifty cents; ``$1`` -> one dollar; ``$0.05`` -> five cents."""
    if not AMOUNT.fullmatch(amount):
        raise ValueError(f"not an amount: {symbol}{amount}")
    unit, units, sub, subs = CURRENCIES[symbol]
    value = Decimal(amount.replace(",", "")).quantize(Decimal("0.01"))
    whole, cents = int(value), int((value - int(value)) * 100)
    words = cardinal(whole) + [unit if whole == 1 else units] if whole or not cents else []
    if cents:
        words += (["and"] if words else []) + cardinal(cents) + [sub if cents == 1 else subs]
    return words
