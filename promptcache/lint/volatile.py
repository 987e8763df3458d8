"""Recognisers for values that change between requests.

Two families:

* :func:`scan_text` finds volatile *literals* in rendered text (request payloads): ISO and
  RFC 2822 date-times, dates, clock times, epoch seconds/milliseconds (timestamps, with their
  granularity), UUIDs, ULIDs, prefixed request ids (``req_...``) and hex nonces (ids). Dates,
  clock times, epochs and hex strings are ambiguous (a release date in a document is stable),
  so they count only next to a whole word that names a clock or an id (``Current date:``,
  ``request id``; not "know" or "runtime"; a bare "at" / "on" only before a clock time with
  seconds or an epoch: "the standup starts at 10:30" is a schedule); full date-times with a
  time of day, UUIDs and ULIDs always count.
* :func:`classify_name` says whether a template variable / Python name is volatile by its
  name (``current_date`` -> timestamp, day; ``request_id`` -> id; ``nonce`` -> random).

Granularity: the smallest unit the value shows (``2025-05-04 14:03:27`` -> second); rules map
day (and coarser) to info and finer to warning, per the goose report behind BR-01.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["VolatileMatch", "classify_name", "granularity_of_strftime", "id_scope",
           "scan_cache_clear", "scan_text"]


@dataclass(frozen=True, slots=True)
class VolatileMatch:
    """One volatile literal in a text.

    Attributes:
        kind: ``"timestamp"`` or ``"id"``.
        subkind: ``"datetime"``, ``"date"``, ``"time"``, ``"epoch"``, ``"uuid"``, ``"ulid"``,
            ``"prefixed-id"``, ``"hex"``.
        granularity: timestamps only (``"millisecond"`` ... ``"day"``).
        start, end: character offsets in the text.
        match: the matched text.
        json_key: the JSON / YAML key the value sits under, if any (``"message_id"``).
    """

    kind: str
    subkind: str
    granularity: str | None
    start: int
    end: int
    match: str
    json_key: str | None


_MONTH = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
          r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_WDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]{0,6}"

_DATETIME = re.compile(
    r"(?<![\d.])\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[T ]"
    r"(?:[01]\d|2[0-3]):[0-5]\d(?P<sec>:[0-5]\d(?P<frac>[.,]\d{1,9})?)?"
    r"(?:Z|[+-]\d{2}:?\d{2}|\s?(?:UTC|GMT))?(?![\d:])"
)
_RFC2822 = re.compile(
    rf"(?:{_WDAY},?\s+)?\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\s+(?:[01]?\d|2[0-3]):[0-5]\d"
    r"(?P<sec>:[0-5]\d)?(?:\s*(?:GMT|UTC|[+-]\d{4}))?"
)
_DATE = re.compile(
    r"(?<![\d./-])(?:\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])"
    r"|\d{4}/(?:0[1-9]|1[0-2])/(?:0[1-9]|[12]\d|3[01])"
    # a sentence's full stop may follow ("Today is 2025-05-04."); a version's ".1" or a file
    # name's ".csv" may not
    r"|(?:0?[1-9]|1[0-2])/(?:0?[1-9]|[12]\d|3[01])/\d{4})(?![\d/-])(?!\.\w)"
    rf"|(?:{_WDAY},?\s+)?{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|(?:{_WDAY},?\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\.?,?\s+\d{{4}}"
)
_TIME = re.compile(
    r"(?<![\d:.])(?:[01]?\d|2[0-3]):[0-5]\d(?P<sec>:[0-5]\d(?:\.\d{1,9})?)?"
    r"(?:\s?[AaPp]\.?[Mm]\.?)?(?![\d:])"
)
#: A time of day followed / preceded by another as a range ("09:00-17:00", "9:00 to 17:00").
_RANGE_AFTER = re.compile(
    r"(?P<sp>\s?)(?:-|\u2013|\u2014|to|until|till)\s?(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)"
    r"(?![\d:])(?:\s?(?P<ap>[AaPp])\.?[Mm]\.?)?")
#: A sentence end before a time: a clock word before it names another time ("All times are
#: UTC. Support opens at 09:00"); a period after a month or weekday abbreviation ("Oct. 2,
#: 14:32") ends no sentence, and a line break alone ("Current time:\n14:32") is a label's.
_SENTENCE_END = re.compile(r"([A-Za-z]*)[.!?]\s")
#: What may stand between a line break and a time that is a label's value on its own line
#: (a bullet, indentation).
_LINE_LABEL = re.compile(r"[ \t]*(?:[-*\u2022>][ \t]*)?")
_ABBREVIATIONS = frozenset(
    "jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat "
    "sun approx ca est".split())
_RANGE_BEFORE = re.compile(r"(?<![\d:])(?:[01]?\d|2[0-3]):[0-5]\d(?:\s?[AaPp]\.?[Mm]\.?)?\s?(?:-|\u2013|\u2014|to|until|till)\s?$")
_EPOCH = re.compile(r"(?<![\d.])(?P<ms>1[5-9]\d{11}|1[5-9]\d{8})(?:\.\d+)?(?!\d)(?!\.\w)")
_UUID = re.compile(
    r"(?<![0-9A-Fa-f-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{12}(?![0-9A-Fa-f-])"
)
_ULID = re.compile(r"(?<![0-9A-Za-z])[0-7][0-9A-HJKMNP-TV-Z]{25}(?![0-9A-Za-z])")
_PREFIXED = re.compile(
    r"(?<![0-9A-Za-z_])(?:req|request|msg|chatcmpl|resp|run|trace|sess|evt|call|corr)[_-]"
    r"[A-Za-z0-9]{12,}(?![0-9A-Za-z])"
)
_HEX = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{16,64}(?![0-9A-Za-z])")

#: Words that name a clock, as whole words: not inside another word ("know", "sometimes",
#: "runtime", "candidates", "locale"; in capitals too: "CURRENTLY", "TIMEOUT", "LOCALE"), but
#: a part of an identifier counts ("current_date", "createdAt", "sentAt", "dateUTC",
#: "lastUpdatedDate", "serverTime": an underscore, a digit or a capital after a lower-case
#: letter starts the next part).
_CLOCK_WORD_LIST = (r"(?i:date|dated|datetime|time|today|now|current|timestamp|clock|as of|"
                    r"updated|generated|created|started|sent|received|ts|epoch|utc|gmt|local|"
                    r"localtime)")
#: The start of a whole word: no letter before it, or a capital after a lower-case letter
#: (the next part of a camelCase identifier: "serverTime", "lastUpdatedDate").
_WORD_START = r"(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))"
#: The end of a whole word: no lower-case letter follows, nor a capital after a capital.
_WORD_END = r"(?![a-z])(?!(?<=[A-Z])[A-Z])"
_CLOCK_WORDS = re.compile(rf"{_WORD_START}{_CLOCK_WORD_LIST}(?i:s)?{_WORD_END}")
#: "at" / "on" alone say when something happens, not that it is the current time: "the
#: standup starts at 10:30", "the policy changed on 2024-03-01" are stable text. They count
#: only before a value no schedule is written in: a clock time with seconds, an epoch.
_CLOCK_WORDS_WEAK = re.compile(
    rf"{_WORD_START}(?:{_CLOCK_WORD_LIST}(?i:s)?|(?i:at|on)){_WORD_END}")
_ID_WORDS = re.compile(
    r"(?i)(?:\bid\b|_id\b|\bids?\b|nonce|request|trace|session|correlation|\brun\b|uuid|guid|"
    r"message|token|span|idempotency)"
)
_KEY_BEFORE = re.compile(r"""(["']?)([A-Za-z_][\w.-]{0,63})\1\s*([:=])\s*["']?\s*$""")
#: What may stand before an unquoted key for it to be a field: a YAML / TOML key starts its
#: line (after indentation or a ``- `` list marker), a flow-mapping key follows its ``{`` or a
#: ``,`` after it on the same line (not a comma in prose: "In Paris, time: ...").
_KEY_START = re.compile(r"(?:(?:^|\n)[ \t]*(?:-[ \t]+)?|\{(?:[^\n{}]*,)?[ \t]*)$")
#: Before an unquoted ``key=``: the text's or line's start, a blank, or a separator
#: (``a=1&b=2``, ``k=v; k2=v2``).
_ASSIGN_START = re.compile(r"(?:^|[\s&?;,{(])$")


def _minutes(hour: str, minute: str, ampm: str | None) -> int:
    """Minutes since midnight of ``hour:minute`` (``ampm``: ``"a"`` / ``"p"`` or None)."""
    h = int(hour)
    if ampm:
        h = h % 12 + (12 if ampm.lower() == "p" else 0)
    return h * 60 + int(minute)


_TIME_PARTS = re.compile(r"(\d+):(\d\d)(?:.*?([AaPp])\.?[Mm]\.?)?$")


def _is_range_start(text: str, m: re.Match[str]) -> bool:
    """Whether the time of day ``m`` (no seconds) starts a range ("09:00-17:00", "9:00 AM -
    5:00 PM", "9:00 to 17:00"): a schedule. A time joined by a dash with no space before it
    is a range's end only when it is later: "14:32-05:00" is a time with its UTC offset, a
    clock (review 27)."""
    r = _RANGE_AFTER.match(text, m.end())
    if r is None:
        return False
    if r.group("sp") or text[r.end("sp")] not in "-\u2013\u2014" or r.group("ap"):
        return True  # a UTC offset has no AM/PM ("11:45pm-12:15am": overnight, review 28)
    start = _TIME_PARTS.match(m.group(0))
    if start is None:
        return True
    return _minutes(r.group("h"), r.group("m"), r.group("ap")) > _minutes(*start.groups())


def _context(text: str, start: int, width: int = 48) -> str:
    return text[max(0, start - width):start]


def _json_key(text: str, start: int) -> str | None:
    """The key of the JSON / YAML / TOML field (or ``key=value`` pair) whose value starts at
    ``start``; None in prose ("Current date and time: ..." has no field ``time``)."""
    m = _KEY_BEFORE.search(text, max(0, start - 80), start)
    if m is None:
        return None
    if not m.group(1):  # an unquoted key: a field only where a key can start
        before = m.start(2)
        start_re = _KEY_START if m.group(3) == ":" else _ASSIGN_START
        if start_re.search(text, max(0, before - 80), before) is None:
            return None
    return m.group(2)


def _has_letters_and_digits(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


_DIGITS = "0123456789"
_WORDISH = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
_ASCII_DIGITS = frozenset(_DIGITS)
#: Characters of context kept on each side of a digit run (longer than any pattern's
#: non-digit stretch: month names, weekday, "GMT").
_PAD = 40


def _next_digit(text: str, pos: int, n: int) -> int:
    """Index of the first ASCII digit at or after ``pos``, or -1.

    Ten ``str.find`` calls (memchr) instead of one ``re`` search for ``[0-9]``: sre tests a
    character class one character at a time, memchr runs at memory speed, and each later
    digit's search stops at the nearest digit found so far.
    """
    best = n
    find = text.find
    for d in _DIGITS:
        i = find(d, pos, best)
        if i >= 0:
            best = i
    return best if best < n else -1


def _windows(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` around its digit runs, merged; every pattern needs a digit, so the
    rest of the text is never scanned (prompts are mostly prose)."""
    out: list[tuple[int, int]] = []
    n = len(text)
    pos = 0
    while True:
        start = _next_digit(text, pos, n)
        if start < 0:
            return out
        run_end = start + 1
        while run_end < n and text[run_end] in _ASCII_DIGITS:
            run_end += 1
        s = max(0, start - _PAD)
        e = min(n, run_end + _PAD)
        for _ in range(80):
            if s > 0 and text[s - 1] in _WORDISH:
                s -= 1
            else:
                break
        for _ in range(80):
            if e < n and text[e] in _WORDISH:
                e += 1
            else:
                break
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
        pos = max(run_end, e - _PAD)


def scan_text(text: str, max_matches: int = 64) -> list[VolatileMatch]:
    """The volatile literals in ``text``, in order of position, without overlaps.

    Only the neighbourhoods of digit runs are scanned (every recognised value holds a digit),
    which keeps prose-heavy prompts cheap. Results are memoised per text (bounded LRU): the SDK
    wrapper lints every call, and a conversation resends the same system prompt and history
    each time. :func:`scan_cache_clear` empties the memo (benchmarks of the cold path use it).

    Args:
        max_matches: stop collecting after this many (a text with thousands of clock times is
            reported by its first ones; the cost stays linear).

    Returns:
        :class:`VolatileMatch` objects; empty for text without any.
    """
    if not text:
        return []
    return list(_scan_memo(text, max_matches))


def scan_cache_clear() -> None:
    """Empty the :func:`scan_text` memo."""
    _scan_memo.cache_clear()


@lru_cache(maxsize=2048)
def _scan_memo(text: str, max_matches: int) -> tuple[VolatileMatch, ...]:
    return tuple(_scan(text, max_matches))


def _scan(text: str, max_matches: int) -> list[VolatileMatch]:
    if not text:
        return []
    windows = _windows(text)
    if not windows:
        return []
    found: list[VolatileMatch] = []
    starts: list[int] = []  # sorted starts of taken spans
    ends: list[int] = []  # their ends, in the same order

    def free(s: int, e: int) -> bool:
        i = bisect.bisect_left(starts, s)
        if i < len(starts) and starts[i] < e:
            return False
        return not (i > 0 and ends[i - 1] > s)

    def add(kind: str, sub: str, gran: str | None, m: re.Match[str]) -> None:
        s, e = m.span()
        if len(found) >= max_matches or not free(s, e):
            return
        i = bisect.bisect_left(starts, s)
        starts.insert(i, s)
        ends.insert(i, e)
        found.append(VolatileMatch(kind, sub, gran, s, e, m.group(0), _json_key(text, s)))

    def each(pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
        for ws, we in windows:
            yield from pattern.finditer(text, ws, we)

    for m in each(_UUID):
        if set(m.group(0).replace("-", "")) <= {"0"}:
            continue
        add("id", "uuid", None, m)
    for m in each(_DATETIME):
        frac = m.group("frac")
        if frac:
            gran = "millisecond" if len(frac) - 1 <= 3 else "microsecond"
        elif m.group("sec"):
            gran = "second"
        else:
            gran = "minute"
        add("timestamp", "datetime", gran, m)
    for m in each(_RFC2822):
        add("timestamp", "datetime", "second" if m.group("sec") else "minute", m)
    for m in each(_ULID):
        if _has_letters_and_digits(m.group(0)) and sum(c.isdigit() for c in m.group(0)) >= 3:
            add("id", "ulid", None, m)
    for m in each(_PREFIXED):
        if _has_letters_and_digits(m.group(0).split("_", 1)[-1]):
            add("id", "prefixed-id", None, m)
    for m in each(_DATE):
        if _CLOCK_WORDS.search(_context(text, m.start())):
            add("timestamp", "date", "day", m)
    for m in each(_TIME):
        if not m.group("sec"):
            # a time of day in a range ("hours 09:00-17:00", "9:00 to 17:00") is a schedule,
            # and a clock word in an earlier sentence ("All times are UTC. Support opens at
            # 09:00") does not name this time (review 25)
            if _is_range_start(text, m) or _RANGE_BEFORE.search(
                    text, max(0, m.start() - 16), m.start()):
                continue
            context = _context(text, m.start(), 32)
            stops = [e.end() for e in _SENTENCE_END.finditer(context)
                    if e.group(1).lower() not in _ABBREVIATIONS]
            line = context.rfind("\n")
            if line >= 0 and not _LINE_LABEL.fullmatch(context, line + 1):
                # a line break ends the sentence unless the time starts its line (a label's
                # value, "Current time:\n14:32"): "All times are UTC\nSupport opens at 09:00"
                # names no clock (review 28)
                stops.append(line + 1)
                stops.sort()
            if _CLOCK_WORDS.search(context[stops[-1]:] if stops else context):
                add("timestamp", "time", "minute", m)
            continue
        if _CLOCK_WORDS_WEAK.search(_context(text, m.start(), 32)):
            add("timestamp", "time", "second", m)
    for m in each(_EPOCH):
        if _CLOCK_WORDS_WEAK.search(_context(text, m.start(), 32)):
            add("timestamp", "epoch", "millisecond" if len(m.group("ms")) == 13 else "second", m)
    for m in each(_HEX):
        value = m.group(0)
        if _has_letters_and_digits(value) and _ID_WORDS.search(_context(text, m.start(), 32)):
            add("id", "hex", None, m)
    found.sort(key=lambda v: v.start)
    return found


# --------------------------------------------------------------------------- names
_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_DAY_WORDS = frozenset({"date", "today", "day", "weekday", "todays"})
_TIME_WORDS = frozenset({"time", "datetime", "now", "timestamp", "utcnow", "clock", "ts",
                         "localtime", "currenttime", "currentdate", "currentdatetime"})
_ID_LAST = frozenset({"uuid", "guid", "ulid", "nonce"})
_ID_NAMES = frozenset({
    ("request", "id"), ("req", "id"), ("message", "id"), ("msg", "id"), ("trace", "id"),
    ("span", "id"), ("run", "id"), ("session", "id"), ("conversation", "id"),
    ("thread", "id"), ("correlation", "id"), ("call", "id"), ("interaction", "id"),
    ("idempotency", "key"), ("chat", "id"), ("turn", "id"),
})
#: Ids that stay the same for a whole conversation (a chat session, thread) and change
#: between conversations: a prefix holding one is shared within the conversation only.
_CONVERSATION_ID_NAMES = frozenset({
    ("session", "id"), ("sess", "id"), ("conversation", "id"), ("convo", "id"),
    ("thread", "id"), ("chat", "id"),
})
#: Whose value a per-user id names: the same on every request of one user, different for
#: the next user (``user_id``, ``user.email``, ``customerId``): a prefix holding one is shared
#: by that user's requests only.
_USER_WORDS = frozenset({"user", "customer"})
#: The last part of a per-user id's name (an email address identifies its user too).
_USER_ID_LAST = frozenset({"id", "uuid", "guid", "email"})
#: Owners whose ``uid`` is a user's too: Firebase's ``request.auth.uid``, ``account.uid``,
#: ``me.uid``... (review 27: 0558302 kept only user/customer and let these go unreported).
_UID_OWNERS = frozenset({"auth", "account", "member", "me", "profile", "person", "principal",
                         "viewer", "firebase", "login", "identity"})
_RANDOM_WORDS = frozenset({"random", "rand", "shuffle", "shuffled", "salt", "jitter"})
_NOT_CLOCK_AFTER = frozenset({"limit", "limits", "out", "outs", "zone", "zones", "format",
                              "budget", "step", "steps", "window", "range", "unit", "units",
                              "taken", "spent", "elapsed", "delta", "cutoff", "series"})


def _tokens(name: str) -> list[str]:
    return [t.lower() for t in _SPLIT.split(name) if t]


def classify_name(name: str) -> tuple[str, str | None] | None:
    """Classify a variable / attribute name by what it suggests.

    Returns:
        ``("timestamp", granularity)``, ``("id", None)``, ``("random", None)`` or None.

    >>> classify_name("current_date")
    ('timestamp', 'day')
    >>> classify_name("request_id")
    ('id', None)
    >>> classify_name("time_limit") is None
    True
    """
    toks = _tokens(name)
    if not toks:
        return None
    last = toks[-1]
    if (last in _ID_LAST or (len(toks) >= 2 and (toks[-2], last) in _ID_NAMES)
            or _is_user_id(toks)):
        return ("id", None)
    if any(t in _RANDOM_WORDS for t in toks):
        return ("random", None)
    if last in _NOT_CLOCK_AFTER:
        return None
    joined = "".join(toks)
    if last in _TIME_WORDS or joined in _TIME_WORDS or (last == "at" and len(toks) >= 2):
        if "date" in toks and last != "time":
            return ("timestamp", "day") if last == "date" else ("timestamp", "second")
        return ("timestamp", "second")
    if last in _DAY_WORDS or "today" in toks:
        return ("timestamp", "day")
    return None


def _is_user_id(toks: list[str]) -> bool:
    """``user_id``, ``user.email``, ``customerId``, ``uid``: a name of a per-user id. A
    ``uid`` of something else (``card.uid``, ``rev_uid``) is not (review 25)."""
    if toks[-1] == "uid":
        return len(toks) == 1 or toks[-2] in _USER_WORDS or toks[-2] in _UID_OWNERS
    return len(toks) >= 2 and toks[-2] in _USER_WORDS and toks[-1] in _USER_ID_LAST


def id_scope(text: str) -> str:
    """How long an id named in ``text`` (a template hole, an expression) lives.

    Returns:
        The shortest lifetime among the identifiers in ``text`` that :func:`classify_name`
        calls ids: ``"request"`` for a per-request one (``request_id``, ``uuid``, ``nonce``,
        a ``uuid4()`` call) or when ``text`` names none; else ``"conversation"`` for a
        per-conversation one (``session_id``, ``conversation_id``, ``thread_id``,
        ``chat_id``: the same on every request of a conversation, new for the next one);
        else ``"user"`` (``user_id``, ``user.email``, ``customerId``, ``uid``: the same on
        every request of one user, different for the next user).

    >>> id_scope("{{ session_id }}"), id_scope("{{ ctx.threadId }}"), id_scope("{{ uuid }}")
    ('conversation', 'conversation', 'request')
    >>> id_scope("{{ user.email }}"), id_scope("{{ user_id }}/{{ session_id }}")
    ('user', 'conversation')
    """
    scopes = set()
    for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", text):
        toks = _tokens(w)
        if not toks or classify_name("_".join(toks)) != ("id", None):
            continue
        if len(toks) >= 2 and (toks[-2], toks[-1]) in _CONVERSATION_ID_NAMES:
            scopes.add("conversation")
        elif _is_user_id(toks):
            scopes.add("user")
        else:
            scopes.add("request")
    for scope in ("request", "conversation", "user"):
        if scope in scopes:
            return scope
    return "request"


_STRFTIME_UNITS = (
    ("f", "microsecond"), ("S", "second"), ("s", "second"), ("T", "second"), ("X", "second"),
    ("c", "second"), ("r", "second"), ("M", "minute"), ("R", "minute"), ("H", "hour"),
    ("I", "hour"), ("p", "hour"), ("d", "day"), ("j", "day"), ("x", "day"), ("D", "day"),
    ("F", "day"), ("A", "day"), ("a", "day"), ("e", "day"), ("U", "week"), ("W", "week"),
    ("V", "week"), ("m", "month"), ("B", "month"), ("b", "month"), ("Y", "year"),
    ("y", "year"),
)


def granularity_of_strftime(fmt: str) -> str | None:
    """The finest unit a ``strftime`` format shows (``"%Y-%m-%d"`` -> ``"day"``).

    Returns:
        ``"microsecond"`` ... ``"year"``, or None when the format has no directive.
    """
    directives = set(re.findall(r"%[-#_0^]?([A-Za-z])", fmt))
    for code, unit in _STRFTIME_UNITS:
        if code in directives:
            return unit
    return None


def iter_lines(text: str) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) pairs."""
    yield from enumerate(text.splitlines(), 1)
