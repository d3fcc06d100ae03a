"""``tokenize_chat``: conversations to token ids plus an assistant-only loss mask, for chat fine-tuning.

Each record holds a conversation (``[{"role": ..., "content": ...}, ...]``). The worker renders it
with a Hugging Face chat template (:mod:`zephon_tokenize.chat_template`: the sandboxed Jinja
environment ``transformers`` uses, ``add_generation_prompt=False``), tokenizes the rendered text of the
whole group with one ``encode_batch`` call, and marks with 1 the tokens that overlap an assistant span
of the text, 0 the rest. That is what ``transformers``' ``apply_chat_template(..., tokenize=True,
return_dict=True, return_assistant_tokens_mask=True)`` returns as ``input_ids`` and
``assistant_masks`` for the same template and tokenizer (checked in the tests), with no
``transformers`` needed at run time.

Rendering the whole conversation and tokenizing it once (rather than tokenizing turn by turn and
concatenating) is deliberate: the ids are then exactly the ones the model sees when the same
template is applied at inference, including merges across turn boundaries.

The operator is stateless (one work group per fetched run of records, like ``tokenize``), so it is
1→1 with each output keeping its record's lineage; a conversation that renders to no tokens at all is
dropped with a tombstone.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zephon_core import Accumulator, ConfigError, Dataset, Operator, ReaderError
from zephon_core.plugin_api import ItemFailure, PassThrough, WorkerFn
from zephon_tokenize.calibrate import sample_plan
from zephon_tokenize.chat_template import ChatTemplate, ChatTemplateError, conversation, load_template, token_mask
from zephon_tokenize.operator import _positive_int
from zephon_tokenize.resolve import BUILTIN_NAMES, resolve_tokenizer
from zephon_tokenize.worker import TokenizeWorker

Payload = dict[str, Any]

MASK_SOURCES = ("auto", "generation", "prefix")


class ChatWorker:
    """Pure, picklable: payloads holding conversations → ``input_ids``, ``num_tokens`` and the mask.

    Args:
        encoder: carries the tokenizer (its JSON travels to process workers; the Rust object is
            rebuilt once per process), shared with ``tokenize``'s worker.
        template: the chat template, compiled lazily once per process.
        field: the payload field holding the conversation.
        mask_field: name of the output mask field.
        keep_messages: keep the conversation field in the output.
    """

    def __init__(
        self, encoder: TokenizeWorker, template: ChatTemplate, field: str, mask_field: str, keep_messages: bool
    ) -> None:
        self.encoder = encoder
        self.template = template
        self.field = field
        self.mask_field = mask_field
        self.keep_messages = keep_messages

    def render(self, payloads: list[Payload]) -> list[tuple[str, list[tuple[int, int]]]]:
        """Each payload's rendered text and assistant spans.

        Raises:
            ItemFailure: naming the position of the record that has no conversation field, holds
                something other than a conversation, or that the template fails on; the kernel
                turns the position into the sample's dataset, shard and index.
        """
        out = []
        field = self.field
        for i, p in enumerate(payloads):
            if field not in p:
                raise ItemFailure(i, f"tokenize_chat: record has no field {field!r} (fields: {sorted(p)}); pass field=")
            try:
                out.append(self.template.render(conversation(p[field])))
            except ChatTemplateError as exc:
                raise ItemFailure(i, f"tokenize_chat: field {field!r}: {exc}") from exc
        return out

    def _encode(self, texts: list[str]) -> list[Any]:
        return self.encoder.tokenizer().encode_batch(texts, add_special_tokens=False)

    def __call__(self, payloads: list[Payload]) -> list[Payload | None]:
        rendered = self.render(payloads)
        encodings = self._encode([text for text, _ in rendered])
        field, keep, mask_field = self.field, self.keep_messages, self.mask_field
        results: list[Payload | None] = []
        for p, (_, spans), enc in zip(payloads, rendered, encodings):
            ids = enc.ids
            if not ids:
                results.append(None)  # nothing to train on: dropped, lineage kept as a tombstone
                continue
            out = dict(p) if keep else {k: v for k, v in p.items() if k != field}
            out["input_ids"] = np.asarray(ids, dtype=np.int32)
            out["num_tokens"] = len(ids)
            out[mask_field] = token_mask(enc.offsets, spans)
            results.append(out)
        return results

    def count_tokens(self, payloads: list[Payload]) -> list[int]:
        """Tokens each conversation renders to: what mixing in tokens counts."""
        return [len(e.ids) for e in self._encode([text for text, _ in self.render(payloads)])]


class TokenizeChat(Operator):
    """Render conversations with a chat template, tokenize them, and mask all but the assistant turns.

    Output per record: ``input_ids`` (np.int32), ``num_tokens`` (int) and ``loss_mask`` (np.uint8,
    aligned with ``input_ids``: 1 on the tokens of assistant turns, 0 elsewhere). Other fields are
    kept; the conversation is dropped unless ``keep_messages``. Follow with
    ``pack_sequences(..., mask_field="loss_mask")`` so packed rows carry the mask and
    ``to_training()`` sets ``labels`` to ``ignore_index`` outside assistant turns.

    Args:
        tokenizer_id: as for ``tokenize``: ``"gpt2"``, a path to ``tokenizer.json`` or a model
            folder, a ``tokenizers.Tokenizer``, or a repo id already in the local HF cache. Offline.
        chat_template: a Jinja template string (Hugging Face's format), a path to
            ``tokenizer_config.json`` (its ``chat_template``), to a ``.jinja`` file, or to a model
            folder holding either. None: look beside ``tokenizer_id`` when it is a local folder or file.
        field: the payload field holding the conversation, a list of ``{"role", "content"}`` dicts.
        mask_from: where assistant tokens come from. ``"generation"``: the template's
            ``{% generation %}`` blocks (``transformers``' convention, so the mask equals its
            ``assistant_masks``). ``"prefix"``: for templates without those tags, each assistant
            turn is found by rendering the conversation up to it, with and without the generation
            prompt; the mask covers what the model must produce after the generation prompt, through
            the end-of-turn token. ``"auto"``: generation blocks when the template has them.
        assistant_role: the role of the turns to train on (``"prefix"`` mode).
        mask_field: name of the output mask field.
        bos_token: the ``bos_token`` the template sees (a token string or id). Default: the
            tokenizer config's, else the tokenizer's usual one.
        eos_token: the ``eos_token`` the template sees, likewise.
        template_variables: more variables for the template (JSON data; they override special tokens).
        chat_template_name: which template of a config holding several named ones (default ``"default"``).
        keep_messages: keep the conversation field next to the ids.
        calibration_samples: conversations per dataset tokenized to estimate tokens per sample,
            when the source mixes by tokens.
        parallelism: worker threads or processes. Rendering is Python (holds the GIL), so
            ``processes`` scales it past one core; ``threads`` is enough when templates are short.
        runner: ``"inline"``, ``"threads"`` or ``"processes"`` (default: the pipeline's).
        name: operator name in errors and fingerprints.
    """

    kind = "tokenize_chat"

    def __init__(
        self,
        tokenizer_id: Any,
        chat_template: str | os.PathLike[str] | None = None,
        field: str = "messages",
        *,
        mask_from: Literal["auto", "generation", "prefix"] = "auto",
        assistant_role: str = "assistant",
        mask_field: str = "loss_mask",
        bos_token: str | int | None = None,
        eos_token: str | int | None = None,
        template_variables: Mapping[str, Any] | None = None,
        chat_template_name: str | None = None,
        keep_messages: bool = False,
        calibration_samples: int = 512,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(parallelism=parallelism, runner=runner, name=name)
        for what, value in (("field", field), ("mask_field", mask_field), ("assistant_role", assistant_role)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"tokenize_chat: {what} must be a non-empty string, got {value!r}")
        if mask_from not in MASK_SOURCES:
            raise ConfigError(f"tokenize_chat: mask_from must be one of {list(MASK_SOURCES)}, got {mask_from!r}")
        if not isinstance(keep_messages, bool):
            raise ConfigError(f"tokenize_chat: keep_messages must be True or False, got {keep_messages!r}")
        if mask_field in ("input_ids", "num_tokens"):
            raise ConfigError(f"tokenize_chat: mask_field {mask_field!r} would overwrite the ids or their count")
        self.calibration_samples = _positive_int("calibration_samples", calibration_samples)
        resolved = resolve_tokenizer(tokenizer_id, shared=True)
        source = load_template(chat_template, tokenizer_id, chat_template_name)
        variables = self._variables(resolved, source.special_tokens, bos_token, eos_token, template_variables)
        template = ChatTemplate(source.template, variables, mask_from, assistant_role)
        template.compiled()  # a syntax error is a configuration error, before any data is read
        self.tokenizer_label = resolved.label
        self.tokenizer_sha256 = resolved.sha256
        self.template_label = source.label
        self.template_sha256 = hashlib.sha256(source.template.encode()).hexdigest()
        self.field = field
        self.mask_field = mask_field
        self.keep_messages = keep_messages
        self.variables = variables
        self.mask_from = template.mask  # "auto" resolved: the fingerprint names what is really done
        self.assistant_role = assistant_role
        encoder = TokenizeWorker(resolved.json, field, None, None, None, False, tokenizer=resolved.tokenizer)
        self._worker = ChatWorker(encoder, template, field, mask_field, keep_messages)
        self.calibration: dict[str, float] | None = None

    @staticmethod
    def _variables(
        resolved: Any,
        from_config: Mapping[str, str | None],
        bos_token: str | int | None,
        eos_token: str | int | None,
        extra: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """Template variables: special tokens (explicit, else the config's, else the tokenizer's), then extras."""
        tok = resolved.tokenizer
        variables: dict[str, Any] = {k: v for k, v in from_config.items() if v is not None}
        for key, explicit, guessed in (
            ("bos_token", bos_token, resolved.bos_id),
            ("eos_token", eos_token, resolved.eos_id),
        ):
            if isinstance(explicit, bool) or not isinstance(explicit, (str, int, type(None))):
                raise ConfigError(f"tokenize_chat: {key} must be a token string, a token id or None, got {explicit!r}")
            if isinstance(explicit, int):
                text = tok.id_to_token(explicit)
                if text is None:
                    raise ConfigError(f"tokenize_chat: {key}={explicit} is outside the tokenizer's vocabulary")
                variables[key] = text
            elif isinstance(explicit, str):
                variables[key] = explicit
            elif key not in from_config and guessed is not None:  # a config's null stays undefined
                variables[key] = tok.id_to_token(guessed)
        if extra is not None:
            if not isinstance(extra, Mapping):
                raise ConfigError(f"tokenize_chat: template_variables must be a dict, got {type(extra).__name__}")
            try:
                extra = json.loads(json.dumps(dict(extra)))  # plain data only, and part of the fingerprint
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"tokenize_chat: template_variables must be JSON data: {exc}") from None
            variables.update(extra)
        return variables

    def config(self) -> dict[str, Any]:
        return {
            # a file's path may differ between machines; its content (the digest) may not
            "tokenizer": self.tokenizer_label if self.tokenizer_label in BUILTIN_NAMES else "custom",
            "tokenizer_sha256": self.tokenizer_sha256,
            "chat_template_sha256": self.template_sha256,
            "variables": self.variables,
            "field": self.field,
            "mask_from": self.mask_from,
            "assistant_role": self.assistant_role,
            "mask_field": self.mask_field,
            "keep_messages": self.keep_messages,
            "calibration_samples": self.calibration_samples,
        }

    def new_accumulator(self, lane: int) -> Accumulator:
        return PassThrough()

    def worker(self) -> WorkerFn:
        return self._worker

    def estimate_tokens(self, datasets: Sequence[Dataset]) -> dict[str, float]:
        """Mean tokens per conversation of each dataset, for a work source that mixes by tokens.

        Renders and tokenizes a fixed, evenly spaced sample of ``calibration_samples`` conversations
        per dataset (so every rank computes the same estimates; the pipeline freezes them into its
        checkpoints). Unlike plain text, bytes are a poor proxy for a conversation's tokens (the
        template adds a header per turn), so the sample is simply tokenized.
        """
        estimates = {}
        for d in datasets:
            payloads: list[Payload] = []
            where: list[tuple[int, int]] = []  # (shard, index) of each payload, to name a bad record
            for shard, idx in sample_plan(d.sizes, self.calibration_samples, 64):
                try:
                    payloads.extend(d.reader.read(shard, idx))
                except ReaderError:
                    raise
                except Exception as exc:
                    raise ReaderError(f"dataset {d.name!r}: calibration read of shard {shard} failed: {exc}") from exc
                where.extend((shard, int(i)) for i in idx)
            try:
                counts = self._worker.count_tokens(payloads) if payloads else []
            except ItemFailure as exc:
                shard, index = where[exc.index]
                raise ConfigError(
                    f"{d.name}[shard {shard}, index {index}] (read to estimate tokens per sample): {exc.message}"
                ) from None
            estimates[d.name] = float(np.mean(counts)) if counts else 0.0
        empty = [name for name, v in estimates.items() if not v > 0]
        if empty:
            raise ConfigError(f"tokenize_chat: datasets {empty} give no tokens, so they cannot be mixed by tokens")
        self.calibration = estimates
        return estimates
