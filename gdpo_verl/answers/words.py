"""The words a math answer may hold beside its values: units after a value, labels before one. Any other words
make the answer not read (gdpo_verl/answers/parsing.py): ``5 \\text{ thousands}``, ``5 \\text{ is wrong}``,
``5 \\text{ per cent}``, ``\\text{Wrong:} 5``.

A unit is read into one spelling, so that units compare by meaning (``5 \\text{ hrs}`` is ``5 \\text{ hours}``,
``5 \\text{ sq cm}`` is ``5 \\text{ cm}^2``, ``60 \\text{ km/h}`` is ``60 \\text{ kph}``): a measure, perhaps with
a power (``square``, ``cubic`` before it, ``squared``, ``cubed`` or ``^2``, ``^3`` after it), measures joined by
``per`` or ``/``, or one word of what answers count (``12 \\text{ students}``). Abbreviations match as written
(``m`` is metres, ``M`` is not read); words of four letters or more in any case, singular or plural.
"""

from __future__ import annotations

import re

# Abbreviations, as written, and the measure each spells.
_ABBREVIATIONS = {
    "mm": "millimeter", "cm": "centimeter", "dm": "decimeter", "m": "meter", "km": "kilometer", "nm": "nanometer",
    "in": "inch", "ft": "foot", "yd": "yard", "mi": "mile", "l": "liter", "L": "liter", "ml": "milliliter",
    "mL": "milliliter", "gal": "gallon", "qt": "quart", "pt": "pint", "g": "gram", "kg": "kilogram",
    "mg": "milligram", "lb": "pound", "lbs": "pound", "oz": "ounce", "s": "second", "sec": "second", "secs": "second",
    "min": "minute", "mins": "minute", "h": "hour", "hr": "hour", "hrs": "hour", "ms": "millisecond", "yr": "year",
    "yrs": "year", "deg": "degree", "rad": "radian", "usd": "dollar", "USD": "dollar",
}
_SPEEDS = {"mph": "mile per hour", "kph": "kilometer per hour", "kmh": "kilometer per hour"}
# Measures written out (singular); other spellings of them.
_MEASURES = frozenset(
    "millimeter centimeter decimeter meter kilometer nanometer inch foot yard mile liter milliliter gallon quart "
    "pint gram kilogram milligram pound ounce ton tonne second minute hour day week month year millisecond degree "
    "radian dollar cent euro yen yuan rupee unit".split()
)
_SPELLINGS = {"metre": "meter", "millimetre": "millimeter", "centimetre": "centimeter", "kilometre": "kilometer",
              "litre": "liter", "millilitre": "milliliter", "feet": "foot"}
# What competition answers count, read as a unit when the word stands alone after the value.
_COUNTS = frozenset(
    "way people person student child children boy girl man men woman women book coin ball marble card candy "
    "apple orange egg cookie ticket page problem question point vertex vertice edge face side diagonal triangle "
    "rectangle tile step move game handshake seat chair table car tree flower dog cat animal bird pencil pen box "
    "bag digit integer solution element subset arrangement combination permutation path term factor divisor "
    "letter word color colour line region piece row column team match".split()
)
_BEFORE = {"square": "2", "sq": "2", "cubic": "3", "cu": "3"}
_AFTER = {"squared": "2", "cubed": "3"}
_WORD = re.compile(r"[A-Za-z]+")

# Words read as a label before a value that an "=" or a ":" follows ("\\text{Area} = 5", "\\text{Answer: } 5"),
# besides a single letter (an unknown's name: "\\mathrm{P} = \\frac12").
LABELS = frozenset(
    "answer final solution result value the total sum product difference quotient remainder ratio probability "
    "area volume perimeter circumference length width height depth radius diameter side base distance speed "
    "velocity rate time cost price profit amount number count mean median mode average maximum minimum max min "
    "angle slope intercept weight mass age score expected of ways".split()
)
# Numbers written as words: a word answer holding one is not read ("\\text{seven}" for a gold of 7 is no verdict).
NUMBER_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million "
    "billion trillion half halves third quarter once twice thrice double triple dozen".split()
)


def singular(word: str) -> str:
    """A word as compared: lower case, a plural s or es dropped (``Hours`` is ``hour``, ``inches`` ``inch``)."""
    word = word.lower()
    if word.endswith(("ches", "shes", "xes")) and len(word) > 4:
        return word[:-2]
    if word.endswith("s") and len(word) > 2 and not word.endswith("ss"):
        return word[:-1]
    return word


def unit(text: str, power: str | None = None) -> str | None:
    """The one spelling of the unit ``text`` (the words of a ``\\text{}`` after a value; ``power``: a ``^2`` or
    ``^3`` written after it), or None when it is not a unit."""
    words = _WORD.findall(text.replace("/", " per "))
    if len(words) == 1 and power is None:
        count = singular(words[0])
        if count in _COUNTS or words[0].lower() in _COUNTS:
            return count
        if words[0].lower() in _SPEEDS:
            return _SPEEDS[words[0].lower()]
    terms, position = [], 0
    while position < len(words):
        if terms:
            if words[position].lower() != "per":
                return None
            position += 1
        term, position = _term(words, position)
        if term is None:
            return None
        terms.append(term)
    if not terms:
        return None
    if power is not None:
        if "^" in terms[-1]:
            return None
        terms[-1] += "^" + power
    return " per ".join(terms)


def _term(words: list[str], position: int) -> tuple[str | None, int]:
    """A measure with its power, from ``words[position]``, and the position after it."""
    power = None
    if position < len(words) and words[position].lower() in _BEFORE:
        power = _BEFORE[words[position].lower()]
        position += 1
    if position >= len(words):
        return None, position
    measure = _measure(words[position])
    if measure is None:
        return None, position
    position += 1
    if position < len(words) and words[position].lower() in _AFTER:
        if power is not None:
            return None, position
        power = _AFTER[words[position].lower()]
        position += 1
    return measure + (f"^{power}" if power else ""), position


def _measure(word: str) -> str | None:
    if word in _ABBREVIATIONS:
        return _ABBREVIATIONS[word]
    if len(word) < 4:
        return None
    spelled = singular(word)
    spelled = _SPELLINGS.get(spelled, _SPELLINGS.get(word.lower(), spelled))
    return spelled if spelled in _MEASURES else None


def is_label(words: list[str]) -> bool:
    """Whether ``words`` are a label: a single letter, or label words only."""
    if len(words) == 1 and len(words[0]) == 1:
        return True
    return bool(words) and all(singular(word) in LABELS or word.lower() in LABELS for word in words)


def has_number_word(words: list[str]) -> bool:
    return any(word.lower() in NUMBER_WORDS or singular(word) in NUMBER_WORDS for word in words)
