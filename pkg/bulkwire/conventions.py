"""The document conventions shared by every way bulkwire writes a document: what a valid id
is, which entity members the document body leaves out, and how ``@metadata`` is merged.
:meth:`bulkwire.BulkWriter.store` (one entity) and :func:`bulkwire.load_parquet` (one row
of a file, encoded in C) both follow these rules, so a row and the equivalent dict give the
same bytes.

They are the official Python client's bulk insert conventions, with one addition: an
entity's own ``@metadata`` mapping is merged in (the official client replaces it).

>>> check_id("users/1")
'users/1'
>>> merge_metadata({"Owner": "me"}, {"@collection": "People"},
...                {"@collection": "Users", "Raven-Python-Type": "app.User"})
{'Owner': 'me', '@collection': 'People', 'Raven-Python-Type': 'app.User'}
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional

from . import _core

__all__ = ["BODY_EXCLUDED_KEYS", "ID_PROBLEMS", "check_id", "collection_name", "id_problem",
           "merge_metadata"]

#: Members of an entity that its document body never holds: ``Id`` is the document id (the
#: official client removes the identity property too), and ``@metadata`` is written last,
#: merged by :func:`merge_metadata`.
BODY_EXCLUDED_KEYS: tuple = _core.BODY_EXCLUDED_KEYS


#: The problems an id can have, by name (what :func:`id_problem` answers), with the words
#: that follow the id's name in an error: ``"empty"``, ``"blank"`` (only whitespace),
#: ``"ends_with_pipe"`` and ``"not_utf8"`` (a lone surrogate).
ID_PROBLEMS: dict = _core.ID_PROBLEMS


def check_id(value: Any, name: str = "id") -> str:
    """``value`` when it is a valid document id: a ``str`` that is not empty, not only
    whitespace (``str.isspace``), does not end with ``|`` (the server would make up the id)
    and holds no lone surrogate (UTF-8 cannot carry it). Raises ``TypeError`` or
    ``ValueError`` naming ``name`` and the problem otherwise.

    This is the one id rule of bulkwire (``bw_document_id_check`` in the C core): the
    entity store path, the Arrow row encoder, counters, time series, attachments and the
    official client's drop-in all ask it.

    >>> check_id("  ")
    Traceback (most recent call last):
    ...
    ValueError: id is only whitespace: '  '
    """
    return _core.check_id(value, name)


def id_problem(value: str) -> Optional[str]:
    """None when the ``str`` ``value`` is a valid document id (as :func:`check_id` judges it),
    else the name of its problem, a key of :data:`ID_PROBLEMS`; ``TypeError`` for a value
    that is not a ``str``.

    >>> id_problem("users|"), id_problem("users/1")
    ('ends_with_pipe', None)
    """
    return _core.id_problem(value)


def merge_metadata(own: Optional[Mapping[str, Any]], metadata: Optional[Mapping[str, Any]],
                   defaults: Mapping[str, Any]) -> dict:
    """The ``@metadata`` of a document, as a new dict (nothing given is modified): the
    entity's own ``@metadata`` mapping, then the ``metadata`` argument (a later key wins),
    then each of ``defaults`` (``@collection``, ``Raven-Python-Type``) where not already
    given. ``None`` stands for "not given"; anything else that is not a mapping raises
    ``TypeError``.

    >>> merge_metadata(None, None, {"@collection": "dicts"})
    {'@collection': 'dicts'}
    """
    return _core.merge_metadata(own, metadata, defaults if type(defaults) is dict else dict(defaults))


# ---- collection names ----
#
# The official client names a class's collection with the ``inflect`` package's plural of the
# class name. bulkwire does not depend on ``inflect``: the rule below gives the same plural
# for the class names entities commonly have (a differential test checks a list of them
# against the client itself), with the same output on every machine. Where English is
# irregular, ``inflect`` keeps a table; so does this rule, for the words entities are named
# after. A class name outside those tables that ``inflect`` treats as an exception may get
# another plural here: the drop-in (``bulkwire.ravendb``) always asks the client's own
# conventions, and bulkwire's own API takes explicit metadata.

_IRREGULAR = {
    "person": "people", "child": "children", "man": "men", "woman": "women", "mouse": "mice",
    "louse": "lice", "tooth": "teeth", "foot": "feet", "goose": "geese", "ox": "oxen",
    "die": "dice", "datum": "data", "criterion": "criteria", "phenomenon": "phenomena",
    "bacterium": "bacteria", "erratum": "errata", "stratum": "strata", "ovum": "ova",
    "agendum": "agenda", "stimulus": "stimuli", "alumnus": "alumni", "nucleus": "nuclei",
    "locus": "loci", "genus": "genera", "alumna": "alumnae", "vertebra": "vertebrae",
    "persona": "personae", "alga": "algae", "vita": "vitae", "helix": "helices",
    "codex": "codices", "radix": "radices", "money": "monies", "testis": "testes",
    "graffito": "graffiti", "mythos": "mythoi",
}
_UNCHANGED = {"sheep", "fish", "series", "species", "deer", "moose", "news", "equipment",
              "information", "chassis", "nexus", "salmon", "trout", "cod", "carp", "aircraft",
              "spacecraft", "offspring", "headquarters", "gallows", "innings", "corps",
              "debris", "mews", "mumps", "measles", "diabetes", "rabies", "herpes", "scissors",
              "trousers", "pliers", "tuna", "furniture", "luggage"}
# "-f"/"-fe" words (and words ending with them) whose plural is "-ves"; others take "-s"
_TO_VES = ("knife", "wife", "life", "leaf", "loaf", "wolf", "half", "calf", "elf",
           "sheaf", "scarf", "dwarf", "wharf")
# "-is" words whose plural is "-ises" (most "-is" words take "-es": analysis, analyses)
_IS_TO_ISES = {"iris", "mantis", "trellis", "metropolis", "cannabis", "pelvis", "penis",
               "ephemeris"}
# consonant + "o" takes "-oes" but for these (vowel + "o" always takes "-s")
_O_TO_OS = {"photo", "piano", "kilo", "memo", "logo", "auto", "cello", "casino", "solo",
            "soprano", "alto", "tempo", "pro", "repo", "demo", "typo", "info", "euro", "metro",
            "macro", "micro", "avocado", "zero", "jumbo", "limbo", "gizmo", "ghetto",
            "manifesto", "commando", "dynamo", "silo", "taco", "kimono", "lingo", "hippo",
            "rhino", "ammo", "limo", "ditto", "bingo", "credo", "crescendo", "fiasco",
            "flamenco", "lido", "libido", "magneto", "oregano", "panto", "polo", "poncho",
            "pueblo", "sombrero", "stucco", "torso", "weirdo"}
_SINGULAR_S = ("ss", "us", "as", "os", "es")  # "-s" words that take "-es" (else "-s" is added)
_LAST_WORD = re.compile(r"([A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+)$")


def _plural_word(word: str) -> str:
    lower = word.lower()
    if lower in _UNCHANGED:
        return word
    if lower in _IRREGULAR:
        plural = _IRREGULAR[lower]
        return plural.capitalize() if word[:1].isupper() else plural
    if lower.endswith(_TO_VES):
        return (word[:-2] if lower.endswith("fe") else word[:-1]) + "ves"
    if lower.endswith("is") and len(lower) > 2:
        return word + "es" if lower in _IS_TO_ISES else word[:-2] + "es"
    if lower.endswith("s"):
        return word + ("es" if lower.endswith(_SINGULAR_S) or lower == "lens" else "s")
    if lower.endswith("zz"):
        return word + "es"
    if lower.endswith("z"):
        return word + ("es" if lower.endswith("az") else "zes")
    if lower.endswith(("x", "ch", "sh")):
        return word + ("s" if lower == "stomach" else "es")
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return word[:-1] + "ies"
    if lower.endswith("o") and len(lower) > 1 and lower[-2] not in "aeiou" and lower not in _O_TO_OS:
        return word + "es"
    return word + "s"


def collection_name(cls: type) -> str:
    """The collection of an entity class: the plural of its name, as the official client's
    conventions give it (``User`` -> ``Users``, ``Company`` -> ``Companies``, ``Person`` ->
    ``People``, ``OrderLine`` -> ``OrderLines``, ``dict`` -> ``dicts``, ``URL`` -> ``URLS``).
    The last word of a compound name is the one made plural.

    >>> collection_name(type("Category", (), {}))
    'Categories'
    """
    name = cls.__name__
    match = _LAST_WORD.search(name)
    if match is None or match.group(1).isdigit():
        plural = name + "s"
    else:
        start = match.start(1)
        plural = name[:start] + _plural_word(name[start:])
    return plural.upper() if name.isupper() else plural
