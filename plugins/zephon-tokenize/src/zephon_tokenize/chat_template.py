"""Hugging Face chat templates, rendered offline and in a sandbox, with the spans of assistant turns.

A chat template is a Jinja template that a tokenizer config ships (``tokenizer_config.json``'s
``chat_template``, or ``chat_template.jinja`` next to it) and that ``transformers``'
``apply_chat_template`` renders into the text a model is trained on. We render it the way
``transformers`` does, so the token ids we produce are the ones the model sees at inference:

* the same Jinja environment: ``ImmutableSandboxedEnvironment`` (templates come from the Hub and are
  untrusted code), ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension, a
  ``tojson`` that does not escape HTML, ``raise_exception``, ``strftime_now``, a guarded ``dict`` and
  ``namespace``, and the ``{% generation %}`` block;
* the same variables: ``messages``, ``tools=None``, ``documents=None``, ``add_generation_prompt``, the
  special tokens (``bos_token``, ``eos_token``, ...) and any extra template variables;
* the same plain-data conversion of the messages (only JSON types reach the template).

One deliberate difference: ``strftime_now`` returns a fixed date (:data:`FIXED_NOW`), not today's.
Templates such as Llama 3.x print the date into the system prompt; with the real clock the same
record would give other tokens on another day, and a resumed run other batches than the original.

Assistant spans (character ranges of the rendered text that the model should learn to produce)
come from one of two places:

* ``{% generation %}`` … ``{% endgeneration %}`` blocks, ``transformers``' convention for
  ``return_assistant_tokens_mask``: a block's output is one span;
* for templates without those tags, **rendering prefixes**: for the assistant message ``i``, the
  span starts where the conversation up to message ``i - 1`` rendered with
  ``add_generation_prompt=True`` stops agreeing with the conversation up to message ``i`` (so it
  starts after the generation prompt: exactly what the model must produce when prompted at
  inference), and ends where the rendering of messages ``0..i`` ends, minus trailing whitespace
  (separators between turns that the model never generates: it stops at the end-of-turn token).
  This needs a template whose rendering of a conversation starts with the rendering of each of its
  prefixes; when it does not, the error says to add generation tags.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import numpy as np

from zephon_core import ConfigError

JINJA2_MIN = (3, 1, 6)
"""Older Jinja2 releases have known sandbox escapes (``transformers`` refuses them too)."""

FIXED_NOW = datetime(2024, 1, 1)
"""What ``strftime_now`` formats: a fixed date, so rendering never depends on the clock."""

GENERATION_TAG = re.compile(r"\{\%-?\s*generation\s*-?\%\}")
"""How ``transformers`` decides whether a template marks assistant output (same expression)."""

SPECIAL_TOKEN_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
"""Keys of ``tokenizer_config.json`` that ``transformers`` passes to templates as variables."""


class ChatTemplateError(Exception):
    """A conversation the template cannot render, or a template whose assistant spans cannot be found."""


# -- loading ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TemplateSource:
    """A chat template's text, where it came from, and the special tokens its config names.

    Attributes:
        template: the Jinja source.
        label: where it came from (a path, or ``"<string>"``), for messages.
        special_tokens: ``bos_token``/``eos_token``/... as given in ``tokenizer_config.json``
            (empty for a template string). None for a key the config sets to null: that token is
            then undefined in the template, as in ``transformers``, rather than guessed.
    """

    template: str
    label: str
    special_tokens: dict[str, str | None] = field(default_factory=dict)


def _looks_like_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def _token_text(value: Any) -> str | None:
    """A special token as ``tokenizer_config.json`` writes it: a string or a serialised ``AddedToken``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _from_config(path: str, name: str | None) -> TemplateSource:
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"tokenize_chat: cannot read chat template config {path!r}: {exc}") from exc
    if not isinstance(config, dict):
        raise ConfigError(f"tokenize_chat: {path!r} does not hold a JSON object")
    specials = _specials(config)
    folder_jinja = os.path.join(os.path.dirname(path), "chat_template.jinja")
    raw = config.get("chat_template")
    if raw is None and os.path.isfile(folder_jinja):  # transformers >= 4.43 saves the template on its own
        return TemplateSource(_read_text(folder_jinja), folder_jinja, specials)
    if isinstance(raw, list):  # named templates: [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
        named = {t.get("name"): t.get("template") for t in raw if isinstance(t, Mapping)}
        want = name or "default"
        if not isinstance(named.get(want), str):
            raise ConfigError(
                f"tokenize_chat: {path!r} has no chat template named {want!r} (it has {sorted(map(str, named))}); "
                "pass chat_template_name="
            )
        raw = named[want]
    if not isinstance(raw, str) or not raw:
        raise ConfigError(
            f"tokenize_chat: {path!r} has no 'chat_template' (and no chat_template.jinja beside it); "
            "pass the template as a string or as a path to a .jinja file"
        )
    return TemplateSource(raw, path, specials)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"tokenize_chat: cannot read chat template {path!r}: {exc}") from exc


def load_template(spec: Any, tokenizer_id: Any = None, name: str | None = None) -> TemplateSource:
    """Find the chat template named by ``spec``, offline.

    Args:
        spec: a Jinja template string; a path to ``tokenizer_config.json`` (its ``chat_template``,
            or ``chat_template.jinja`` beside it); a path to a ``.jinja`` file; a model folder holding
            either; or None to look beside ``tokenizer_id`` when that is a local path.
        tokenizer_id: the operator's tokenizer, used when ``spec`` is None.
        name: which template of a config that holds several named ones (default ``"default"``).

    Raises:
        ConfigError: nothing usable was found (the message says what to pass).
    """
    if spec is None:
        where = os.fspath(tokenizer_id) if isinstance(tokenizer_id, (str, os.PathLike)) else None
        folder = None
        if where is not None:
            where = os.path.expanduser(where)
            folder = where if os.path.isdir(where) else os.path.dirname(where) if os.path.isfile(where) else None
        if folder is None:
            raise ConfigError(
                "tokenize_chat: pass chat_template= (a Jinja template string, or a path to tokenizer_config.json "
                "or to a .jinja file); it can only be found on its own when tokenizer_id is a local model folder"
            )
        spec = folder
    if isinstance(spec, str) and _looks_like_template(spec):
        return TemplateSource(spec, "<string>")
    if not isinstance(spec, (str, os.PathLike)):
        raise ConfigError(
            f"tokenize_chat: chat_template must be a template string or a path, got {type(spec).__name__}"
        )
    path = os.path.expanduser(os.fspath(spec))
    if os.path.isdir(path):
        for candidate in ("chat_template.jinja", "tokenizer_config.json"):
            full = os.path.join(path, candidate)
            if os.path.isfile(full):
                if candidate.endswith(".json"):
                    return _from_config(full, name)
                config = os.path.join(path, "tokenizer_config.json")
                specials = _from_config_specials(config) if os.path.isfile(config) else {}
                return TemplateSource(_read_text(full), full, specials)
        raise ConfigError(f"tokenize_chat: folder {path!r} holds neither chat_template.jinja nor tokenizer_config.json")
    if not os.path.isfile(path):
        raise ConfigError(
            f"tokenize_chat: chat_template {spec!r} is neither a Jinja template (no '{{{{' or '{{%') nor an existing file"
        )
    if path.endswith(".json"):
        return _from_config(path, name)
    return TemplateSource(_read_text(path), path)


def _specials(config: Mapping[str, Any]) -> dict[str, str | None]:
    """The special tokens a tokenizer config names (None where it sets one to null)."""
    return {k: _token_text(config[k]) for k in SPECIAL_TOKEN_KEYS if k in config}


def _from_config_specials(path: str) -> dict[str, str | None]:
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    return _specials(config) if isinstance(config, dict) else {}


# -- plain data ------------------------------------------------------------------------------------
def plain(value: Any) -> Any:
    """``value`` rebuilt from JSON types only, as ``transformers`` does before rendering.

    Objects with methods (numpy arrays, custom classes) are what a sandbox escape needs; templates
    only ever read strings, numbers, lists and dicts. Anything else becomes a ``"<TypeName>"``
    placeholder.
    """
    t = type(value)
    if value is None or t in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1:
        return [plain(v) for v in value.tolist()]
    return f"<{type(value).__name__}>"


def conversation(value: Any) -> list[dict[str, Any]]:
    """Validate one record's conversation and return it as plain messages (``None`` values dropped).

    A conversation is a list of dicts, each with a string ``role`` and a ``content`` that is a
    string, a list of content blocks, or None (e.g. an assistant message holding only tool calls).

    Raises:
        ChatTemplateError: the value is not such a list (the message says which message is wrong).
    """
    if isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise ChatTemplateError(
            f"a conversation must be a list of {{'role': ..., 'content': ...}} dicts, got {type(value).__name__}"
        )
    messages = []
    for i, message in enumerate(value):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"message {i} is a {type(message).__name__}, not a {{'role', 'content'}} dict")
        if not isinstance(message.get("role"), str):
            raise ChatTemplateError(f"message {i} has no string 'role' (keys: {sorted(map(str, message))})")
        if "content" not in message:
            raise ChatTemplateError(
                f"message {i} ({message['role']}) has no 'content' (keys: {sorted(map(str, message))})"
            )
        content = message["content"]
        if content is not None and not isinstance(content, (str, list, tuple, np.ndarray)):
            raise ChatTemplateError(
                f"message {i} ({message['role']}): content must be a string or a list of content blocks, "
                f"got {type(content).__name__}"
            )
        # like transformers: a None value means "absent" (many templates render a literal "None" otherwise)
        messages.append({k: v for k, v in plain(message).items() if v is not None})
    return messages


# -- the Jinja environment -------------------------------------------------------------------------
@dataclass
class _Tracker:
    """Output length so far and the ``{% generation %}`` spans of the render in progress."""

    length: int = 0
    spans: list[tuple[int, int]] = field(default_factory=list)


_TRACKING: ContextVar[_Tracker | None] = ContextVar("zephon_chat_generation", default=None)
"""Per thread (and per render): worker threads share one compiled template."""


def _environment() -> Any:
    """A sandboxed Jinja environment configured as ``transformers``' chat template environment."""
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    version = tuple(int(p) for p in re.findall(r"\d+", jinja2.__version__)[:3])
    if version < JINJA2_MIN:
        raise ConfigError(
            f"tokenize_chat needs jinja2>={'.'.join(map(str, JINJA2_MIN))} (older versions have sandbox escapes); "
            f"this is {jinja2.__version__}: pip install -U jinja2"
        )

    class GenerationTracker(jinja2.ext.Extension):
        """``{% generation %}…{% endgeneration %}``: records the character span of the block's output."""

        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_support"), [], [], body).set_lineno(lineno)

        def _support(self, caller: Any) -> str:
            rv: str = caller()
            tracker = _TRACKING.get()
            if tracker is not None:
                # the block's output is yielded right after this returns, at the current length
                tracker.spans.append((tracker.length, tracker.length + len(rv)))
            return rv

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(
        x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
    ) -> str:
        # Jinja's own tojson escapes HTML characters, which would change the rendered text
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        return FIXED_NOW.strftime(fmt)

    class TemplateDict:
        """``dict(...)`` without attribute access to the real type (no type hackery from templates)."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        """``namespace(...)`` that refuses underscore names (no way to CPython internals)."""

        def __init__(*args: Any, **kwargs: Any) -> None:  # Jinja's own signature trick: `self` may be a key
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key in attrs:
                TemplateNamespace._check(key)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, key: str, value: Any) -> None:
            TemplateNamespace._check(key)
            jinja2.utils.Namespace.__setitem__(self, key, value)

        @staticmethod
        def _check(key: Any) -> None:
            if isinstance(key, str) and key.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"chat templates cannot set {key!r} on a namespace")

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


class ChatTemplate:
    """A compiled chat template: renders conversations and finds the assistant spans in the text.

    Compiled once per process, lazily (the operator's worker carries only the template string to
    process workers). Rendering is thread-safe.

    Args:
        source: the Jinja text.
        variables: template variables (special tokens and any extras), plain JSON data.
        mask: ``"generation"`` (``{% generation %}`` blocks), ``"prefix"`` (rendering prefixes), or
            ``"auto"``: generation blocks when the template has them, else prefixes.
        assistant_role: the role whose turns are assistant output (prefix mode only).
    """

    def __init__(
        self, source: str, variables: Mapping[str, Any], mask: str = "auto", assistant_role: str = "assistant"
    ):
        self.source = source
        self.variables = dict(variables)
        self.has_generation = bool(GENERATION_TAG.search(source))
        if mask == "auto":
            mask = "generation" if self.has_generation else "prefix"
        if mask == "generation" and not self.has_generation:
            raise ConfigError(
                "tokenize_chat: mask_from='generation' but the chat template has no {% generation %} block; "
                "use mask_from='prefix' (or 'auto')"
            )
        self.mask = mask
        self.assistant_role = assistant_role
        self._template: Any = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_template"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def compiled(self) -> Any:
        """The Jinja template, compiled once per process."""
        t = self._template
        if t is None:
            with self._lock:
                if self._template is None:
                    self._template = compile_template(self.source)
                t = self._template
        return t

    def _render(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool, track: bool
    ) -> tuple[str, list[tuple[int, int]]]:
        context = {
            **self.variables,
            "messages": messages,
            "tools": None,
            "documents": None,
            "add_generation_prompt": add_generation_prompt,
        }
        template = self.compiled()
        if not track:
            return template.render(**context), []
        tracker = _Tracker()
        token = _TRACKING.set(tracker)
        try:
            parts = []
            for piece in template.generate(**context):
                parts.append(piece)
                tracker.length += len(piece)
        finally:
            _TRACKING.reset(token)
        return "".join(parts), tracker.spans

    def render(self, messages: list[dict[str, Any]]) -> tuple[str, list[tuple[int, int]]]:
        """The rendered conversation (``add_generation_prompt=False``) and its assistant spans.

        Raises:
            ChatTemplateError: the template failed on this conversation, or (prefix mode) its
                renderings of prefixes are not prefixes of the whole (add generation tags then).
        """
        import jinja2

        try:
            text, spans = self._render(messages, False, self.mask == "generation")
            if self.mask == "prefix":
                spans = self._prefix_spans(messages, text)
        except jinja2.TemplateError as exc:
            raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from exc
        except ChatTemplateError:
            raise
        except Exception as exc:  # e.g. TypeError from a filter applied to the wrong type
            raise ChatTemplateError(f"the chat template failed: {type(exc).__name__}: {exc}") from exc
        return text, spans

    def _prefix_spans(self, messages: list[dict[str, Any]], full: str) -> list[tuple[int, int]]:
        memo: dict[tuple[int, bool], str] = {}

        def upto(k: int, prompt: bool) -> str:
            hit = memo.get((k, prompt))
            if hit is None:
                try:
                    hit = self._render(messages[:k], prompt, False)[0]
                except Exception as exc:
                    if k:
                        raise ChatTemplateError(
                            f"the chat template fails on the first {k} messages, which tokenize_chat renders to "
                            f"find the assistant turns ({type(exc).__name__}: {exc}); mark the assistant output "
                            "with {% generation %}...{% endgeneration %} instead"
                        ) from exc
                    hit = ""  # many templates read messages[0]: an empty conversation renders as nothing
                memo[(k, prompt)] = hit
            return hit

        spans = []
        for i, message in enumerate(messages):
            if message.get("role") != self.assistant_role:
                continue
            before, prompted, through = upto(i, False), upto(i, True), upto(i + 1, False)
            if not (through.startswith(before) and full.startswith(through)):
                raise ChatTemplateError(
                    f"cannot find assistant message {i} by rendering prefixes: the template renders a shorter "
                    "conversation as something other than the start of the longer one; mark the assistant "
                    "output in the template with {% generation %}...{% endgeneration %} (transformers' convention)"
                )
            start = len(before)
            if prompted.startswith(before):  # skip the generation prompt: the model is given it at inference
                start += _common_prefix(prompted[start:], through[start:])
            end = max(start, len(through.rstrip()))
            spans.append((start, end))
        return spans


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two strings."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def compile_template(source: str) -> Any:
    """Compile ``source`` in the sandboxed environment; a syntax error is a :class:`ConfigError`."""
    import jinja2

    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ConfigError(f"tokenize_chat: the chat template does not compile: {exc} (line {exc.lineno})") from exc


def token_mask(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """1 for every token whose characters overlap an assistant span, else 0 (``uint8``).

    Same rule as ``transformers``' ``return_assistant_tokens_mask``: a token cut by a span's edge
    (a leading space merged with the first word of the reply, say) counts as inside.
    """
    n = len(offsets)
    mask = np.zeros(n, dtype=np.uint8)
    if not n or not spans:
        return mask
    off = np.asarray(offsets, dtype=np.int64).reshape(n, 2)
    starts, ends = off[:, 0], off[:, 1]
    for s, e in spans:
        mask[(ends > s) & (starts < e)] = 1
    return mask
