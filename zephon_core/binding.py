"""Binding a pipeline to its source: calibration, the resolved window, and the source as it runs.

A pipeline runs a copy of its :class:`~zephon_core.WorkSource` with the frozen token estimates, bound to its lanes
and window (``"auto"`` resolved here), paced by the update lead when steered; release-0.1 sizing is adopted here too."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from zephon_core import checkpoint as ckpt
from zephon_core.checkpoint.replay import LaneStart
from zephon_core.defaults.sources.static_mixture import check_token_estimates
from zephon_core.defaults.sources.steering import LeadGate
from zephon_core.errors import ConfigError, PluginError
from zephon_core.runtime.lifecycle import weakly
from zephon_core.work.chunking import DEFAULT_FLUSH_EVERY, LEGACY_DEFAULT, ChunkSizing
from zephon_core.work.contract import LaneBound, Steerable, TokenEstimated, TokenSized, Windowed, WorkSource
from zephon_core.work.lanes import LaneLayout
from zephon_core.work.prefetch import with_lookahead

if TYPE_CHECKING:
    from zephon_core.pipeline import Shared
else:
    Shared = object


class Binding(Shared):
    """The pipeline's source as it runs (calibrated, bound to lanes and window); see the module docstring."""

    def calibrate(self) -> dict[str, float] | None:
        """Freeze per-dataset tokens-per-sample estimates when the source mixes or sizes chunks in tokens.

        Once, before the first chunk, the first operator with ``estimate_tokens`` measures each dataset (estimates
        given to the source or restored from a checkpoint are kept); stored in every checkpoint, so a resumed run on
        any world size draws the same samples. None when no estimates are needed, or only optional and unmeasured."""
        tokens = self.source.mixing_unit == "tokens"
        sized = self.source.token_estimates_use if isinstance(self.source, TokenSized) else None
        use = "required" if tokens else sized
        if use is None:
            return None
        if self._token_estimates is None:
            given = self.source.tokens_per_sample if isinstance(self.source, TokenEstimated) else None
            names = [d.name for d in self.source.datasets]
            if given is not None:
                self._token_estimates = check_token_estimates(given, names)
            else:
                for op in self._ops:
                    est = op.estimate_tokens(self.source.datasets)
                    if est is not None:
                        try:
                            self._token_estimates = check_token_estimates(est, names)
                        except ConfigError as exc:
                            raise PluginError(f"operator {op.name!r} gave bad token estimates: {exc}") from exc
                        break
                else:
                    if use != "required":
                        return None
                    need = "mixes by tokens" if tokens else "sizes chunks in tokens (chunk_size='auto')"
                    raise ConfigError(
                        f"the work source {need} but no operator can estimate tokens per sample: add a "
                        "tokenizer operator (e.g. .tokenize(...)) or give the source tokens_per_sample="
                    )
        return dict(self._token_estimates)

    def _window_setting(self) -> int | str:
        """``flush_every_k_chunks`` as set (or as adopted from a release-0.1 checkpoint)."""
        return self._legacy_window if self._legacy_window is not None else self._opts.flush_every_k_chunks

    def _describe_window(self) -> dict[str, Any]:
        """Definition entries for the window: the setting, and for ``"auto"`` the tokens it holds."""
        setting = self._window_setting()
        if setting != "auto":
            return {"flush_every_k_chunks": setting}
        tokens = self.source.window_tokens if isinstance(self.source, ChunkSizing) else None
        return {"flush_every_k_chunks": "auto", "window_tokens": tokens}

    @property
    def flush_every(self) -> int:
        """Chunks per window, resolved (``"auto"`` is sized from the token estimates, calibrating if need be)."""
        self._active_source()
        return self._window_chunks

    def _resolve_window(self, configured: WorkSource) -> int:
        """``flush_every_k_chunks`` for ``configured`` (a source bound to its token estimates)."""
        setting = self._window_setting()
        if isinstance(setting, int):
            return setting
        return configured.flush_every_for_window() if isinstance(configured, ChunkSizing) else DEFAULT_FLUSH_EVERY

    def _active_source(self) -> WorkSource:
        key = (self._opts.lanes, self._window_setting())
        if self._active is None or self._active_key != key:
            self._active = self._configure(self.source, self.calibrate())
            self._active_key = key
        return self._active

    def _configure(self, source: WorkSource, estimates: dict[str, float] | None) -> WorkSource:
        """``source`` as this pipeline runs it: with the frozen token estimates when it uses them, bound to the
        lanes (``with_lanes``) and window (``with_window``) when it asks (both are in the fingerprint already)."""
        sized = isinstance(source, TokenSized) and source.token_estimates_use is not None
        if estimates is not None and (source.mixing_unit == "tokens" or sized):
            source = source.with_token_estimates(estimates)
        if isinstance(source, LaneBound):
            if self._opts.lane_assignment != "modulo":
                raise ConfigError(
                    f"option lane_assignment={self._opts.lane_assignment!r}: {type(source).__name__} draws each "
                    "lane's data from the lane's own stream, so there is no chunk order to deal out; use it "
                    "with StaticMixtureWorkSource"
                )
            source = source.with_lanes(self._opts.lanes)
        self._window_chunks = self._resolve_window(source)
        if isinstance(source, Windowed):
            source = source.with_window(self._window_chunks)
        return source

    def _feed_source(self, source: WorkSource, layout: LaneLayout) -> WorkSource:
        """What the feeder reads: ``source`` with reader prefetch, paced by the update lead if steerable."""
        fed = with_lookahead(source, layout.num_lanes)  # readers prefetch what the next chunks read
        lead = source.update_lead_windows if isinstance(source, Steerable) else None
        if not (isinstance(lead, int) and self._window_chunks):
            return fed
        resume, stopping = weakly(self._resume_window, lambda lane: 0), weakly(self._stopping, lambda: True)
        return LeadGate(fed, layout, self._window_chunks, lead, resume, stopping)

    def _resume_window(self, lane: int) -> int:
        """The window ``lane`` resumes from after its last delivered microbatch (the update anchor)."""
        eng = self._engine
        return self._starts.get(lane, LaneStart()).window if eng is None else eng.mux.resume[lane].window

    def _stopping(self) -> bool:
        return self._closed or (self._engine is not None and self._engine.ctx.stop.is_set())

    def _adopt_release_0_1_sizing(self, state: Mapping[str, Any]) -> Callable[[], None]:
        """Size chunks and windows as release 0.1 did (it resolved the defaults differently) for its checkpoints, if
        this pipeline keeps those defaults and that makes the fingerprints equal (else refused). Returns its undo."""
        definition = state["definition"]
        if state["fingerprint"] == ckpt.fingerprint(self.definition()) or not isinstance(definition, Mapping):
            return lambda: None
        saved = (self.source, self._legacy_window, self._active, self._active_key)

        def undo() -> None:
            self.source, self._legacy_window, self._active, self._active_key = saved

        changed = False
        if (
            isinstance(self.source, ChunkSizing)
            and self.source.chunk_setting is None
            and isinstance(old_source := definition.get("source"), Mapping)
            and old_source.get("chunk_size") == LEGACY_DEFAULT
        ):
            legacy = copy.copy(self.source)  # the caller's source is left as it was
            legacy.use_release_0_1_default()
            self.source = legacy
            changed = True
        if (
            self._opts.flush_every_k_chunks == "auto"
            and definition.get("flush_every_k_chunks") == DEFAULT_FLUSH_EVERY
            and "window_tokens" not in definition
        ):
            self._legacy_window = DEFAULT_FLUSH_EVERY
            changed = True
        if not changed or state["fingerprint"] != ckpt.fingerprint(self.definition()):
            undo()
            return lambda: None
        self._active = None
        return undo
