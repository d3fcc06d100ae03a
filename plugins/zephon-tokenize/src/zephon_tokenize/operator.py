"""``tokenize``: text to token ids on parallel workers, and the calibration for mixing in tokens.

The accumulator is the kernel's :class:`~zephon_core.defaults.operators.mapping.PassThrough`: it hands each
incoming run of records (one fetched chunk) to a worker as one group, so the expensive part,
``encode_batch`` over the group, is all on the workers and the operator is stateless; on the
processes runner the kernel may therefore run it in the same task as the fetch and the maps before
it (stage fusion), so records do not cross between processes just to be tokenized. ``split_long_samples`` makes it 1→n (each piece keeps the document's
lineage; the kernel gives each piece its own key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zephon_core import Accumulator, ConfigError, Dataset, Operator, Traits
from zephon_core.plugin_api import PassThrough, WorkerFn
from zephon_tokenize.calibrate import estimate_tokens_per_sample
from zephon_tokenize.resolve import BUILTIN_NAMES, resolve_tokenizer
from zephon_tokenize.worker import TokenizeWorker


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"tokenize: {name} must be an int >= {minimum}, got {value!r}")
    return value


class Tokenize(Operator):
    """Tokenize a text field with a Hugging Face ``tokenizers`` tokenizer, offline.

    Args:
        tokenizer_id: ``"gpt2"``, a path to ``tokenizer.json`` (or its folder), a
            ``tokenizers.Tokenizer``, or a Hugging Face repo id already in the local cache.
            Nothing is ever downloaded.
        field: the payload field holding the text; it is replaced by ``input_ids`` (np.int32)
            and ``num_tokens`` (int). Other fields are kept.
        add_bos: prepend the BOS token to every document.
        add_eos: append the EOS token to every document (documents are separated by it when packed).
        max_length: most tokens per output, BOS/EOS included. Longer documents are truncated
            (keeping BOS/EOS) unless ``split_long_samples``.
        split_long_samples: cut long documents into consecutive pieces of at most ``max_length``
            tokens instead of truncating (1→n; every piece keeps the document's lineage).
        bos_token: BOS token string or id (default: the tokenizer's usual one).
        eos_token: EOS token string or id (default: the tokenizer's usual one).
        keep_text: keep the text field next to the ids.
        calibration_read_samples: documents read per dataset to measure bytes per document, for
            token-aware mixing (see :mod:`zephon_tokenize.calibrate`).
        calibration_tokenize_bytes: text tokenized per dataset to measure tokens per byte.
        parallelism: worker threads or processes. When it equals the cores you give to
            tokenization, also set ``TOKENIZERS_PARALLELISM=false`` so the tokenizer's own thread
            pool does not compete with the workers (see docs/text-pipeline.md).
        runner: ``"inline"``, ``"threads"`` or ``"processes"`` (default: the pipeline's).
        name: operator name in errors and fingerprints.
    """

    kind = "tokenize"

    def __init__(
        self,
        tokenizer_id: Any,
        field: str = "text",
        add_bos: bool = False,
        add_eos: bool = True,
        max_length: int | None = None,
        split_long_samples: bool = False,
        *,
        bos_token: str | int | None = None,
        eos_token: str | int | None = None,
        keep_text: bool = False,
        calibration_read_samples: int = 4096,
        calibration_tokenize_bytes: int = 1 << 18,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(parallelism=parallelism, runner=runner, name=name)
        if not isinstance(field, str) or not field:
            raise ConfigError(f"tokenize: field must be a non-empty string, got {field!r}")
        flags = {
            "add_bos": add_bos,
            "add_eos": add_eos,
            "split_long_samples": split_long_samples,
            "keep_text": keep_text,
        }
        for flag, value in flags.items():
            if not isinstance(value, bool):
                raise ConfigError(f"tokenize: {flag} must be True or False, got {value!r}")
        resolved = resolve_tokenizer(tokenizer_id, bos_token=bos_token, eos_token=eos_token, shared=True)
        if add_bos and resolved.bos_id is None:
            raise ConfigError(
                f"tokenize: add_bos=True but tokenizer {resolved.label!r} has no known BOS; pass bos_token="
            )
        if add_eos and resolved.eos_id is None:
            raise ConfigError(
                f"tokenize: add_eos=True but tokenizer {resolved.label!r} has no known EOS; pass eos_token="
            )
        specials = int(add_bos) + int(add_eos)
        if max_length is not None:
            _positive_int("max_length", max_length, max(1, specials + (0 if split_long_samples else 1)))
        elif split_long_samples:
            raise ConfigError("tokenize: split_long_samples=True needs max_length (the longest piece)")
        self.calibration_read_samples = _positive_int("calibration_read_samples", calibration_read_samples)
        self.calibration_tokenize_bytes = _positive_int("calibration_tokenize_bytes", calibration_tokenize_bytes)
        self.tokenizer_label = resolved.label
        self.field = field
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.max_length = max_length
        self.split_long_samples = split_long_samples
        self.keep_text = keep_text
        self.tokenizer_sha256 = resolved.sha256
        self._worker = TokenizeWorker(
            resolved.json,
            field,
            resolved.bos_id if add_bos else None,
            resolved.eos_id if add_eos else None,
            max_length,
            split_long_samples,
            keep_text,
            tokenizer=resolved.tokenizer,
        )
        self.traits = Traits(fanout="many" if split_long_samples else "one")
        self.calibration: dict[str, float] | None = None

    def config(self) -> dict[str, Any]:
        w = self._worker
        return {
            # a file's path may differ between machines; its content (the digest) may not
            "tokenizer": self.tokenizer_label if self.tokenizer_label in BUILTIN_NAMES else "custom",
            "tokenizer_sha256": self.tokenizer_sha256,
            "field": self.field,
            "bos_id": w.bos_id,
            "eos_id": w.eos_id,
            "max_length": self.max_length,
            "split_long_samples": self.split_long_samples,
            "keep_text": self.keep_text,
            "calibration": [self.calibration_read_samples, self.calibration_tokenize_bytes],
        }

    def new_accumulator(self, lane: int) -> Accumulator:
        return PassThrough()

    def worker(self) -> WorkerFn:
        return self._worker

    def estimate_tokens(self, datasets: Sequence[Dataset]) -> dict[str, float]:
        """Tokens per sample of each dataset, for a work source that mixes by tokens.

        Reads a fixed, seeded sample of each dataset and tokenizes it with this operator's worker,
        so every rank computes bit-identical estimates. The pipeline freezes them into checkpoints.
        """
        estimates = {
            d.name: estimate_tokens_per_sample(
                d,
                self._worker,
                read_samples=self.calibration_read_samples,
                tokenize_bytes=self.calibration_tokenize_bytes,
            )
            for d in datasets
        }
        empty = [name for name, v in estimates.items() if not v > 0]
        if empty:
            raise ConfigError(f"tokenize: datasets {empty} give no tokens, so they cannot be mixed by tokens")
        self.calibration = estimates
        return estimates
