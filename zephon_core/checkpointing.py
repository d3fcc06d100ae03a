"""A pipeline's side of checkpoints: gathering this rank's state, and resuming from a validated one.

The checkpoint's fields are written and validated by :mod:`zephon_core.checkpoint.schema` only; here
the pipeline supplies the values (lane positions from the engine or the restored starts, the source's
state, the frozen estimates, the skip log) and checks what depends on itself: the fingerprint, the
lanes it owns, and that every replay window exists in its data. :class:`Checkpointing` is a part of
:class:`~zephon_core.pipeline.Pipeline`, which is where its methods are documented for users.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from zephon_core import checkpoint as ckpt
from zephon_core.checkpoint.replay import LaneStart
from zephon_core.checkpoint.schema import checkpoint_dict, skipped_steps
from zephon_core.defaults.sources.static_mixture import check_token_estimates
from zephon_core.errors import CheckpointError, ConfigError
from zephon_core.ops.contract import AdoptsRecordedConfig
from zephon_core.work.contract import LaneStateful, WorkSource
from zephon_core.work.ids import CHUNK_BITS
from zephon_core.work.lanes import LaneLayout

if TYPE_CHECKING:
    from zephon_core.hookspecs import Observer
    from zephon_core.ops.contract import Operator
    from zephon_core.options import Options
    from zephon_core.runtime.engine import Engine


def _differ_only_by_absent_labels(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether two definitions are the same but for identity labels (``Pipeline.label``) that one of
    them lacks entirely: a pipeline rebuilt from a description (e.g. a recipe) resumes a checkpoint of
    the same pipeline written in code, and the other way round. Labels on both sides must match."""
    if ("labels" in saved) == ("labels" in current):
        return False
    unlabelled = [{k: v for k, v in d.items() if k != "labels"} for d in (saved, current)]
    return ckpt.fingerprint(unlabelled[0]) == ckpt.fingerprint(unlabelled[1])


class Checkpointing:
    """``state_dict`` and ``load_state_dict`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by Pipeline.__init__
        source: WorkSource
        _opts: Options
        _engine: Engine | None
        _manifest: Observer | None
        _active: WorkSource | None
        _starts: dict[int, LaneStart]
        _token_estimates: dict[str, float] | None
        _skips: list[dict[str, int]]
        _pending_skip: int

        @property
        def operators(self) -> list[Operator | Any]: ...

        def definition(self) -> dict[str, Any]: ...

        def _adopt_release_0_1_sizing(self, state: Mapping[str, Any]) -> Callable[[], None]: ...

        def _configure(self, source: WorkSource, estimates: dict[str, float] | None) -> WorkSource: ...

        def _resolve_window(self, configured: WorkSource) -> int: ...

    def state_dict(self) -> dict[str, Any]:
        """This rank's lanes as plain JSON-compatible data (see :mod:`zephon_core.checkpoint`).

        With a manifest, what it has gathered is written first: every step before a checkpoint is on
        disk, and a run resumed from it delivers (and records) the later steps again.
        """
        if self._manifest is not None:
            self._manifest.flush(wait=True)
        opts = self._opts
        layout = opts.layout()
        if self._engine is not None:
            lane_states = self._engine.lane_states()
            next_lane = self._engine.next_lane
        else:
            lane_states = {}
            for lane in layout.owned:
                s = self._starts.get(lane, LaneStart())
                lane_states[lane] = {"window": s.window, "skip": s.skip, "delivered": s.delivered}
            next_lane = min(layout.owned, key=lambda x: (lane_states[x]["delivered"], x))
        return checkpoint_dict(
            definition=self.definition(),
            num_lanes=opts.lanes,
            rank=opts.dp_rank,
            world_size=opts.dp_world_size,
            lanes={lane: self._with_lane_source(lane, lane_states[lane]) for lane in layout.owned},
            source=(self._active or self.source).state_dict(),
            tokens_per_sample=self._token_estimates,
            next_lane=next_lane,
            skip_log=self._skips,
            pending_skip=self._pending_skip,
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint taken on any world size (merge ranks with ``merge_checkpoints``).

        Everything is validated before anything changes: a rejected checkpoint leaves the pipeline
        as it was.
        """
        if self._engine is not None:
            raise CheckpointError("load_state_dict must be called before iterating the pipeline")
        state = ckpt.validate(state)
        undo = self._adopt_release_0_1_sizing(state)
        undo_operators = self._adopt_recorded_operator_configs(state)
        try:
            self._load_validated(state)
        except BaseException:
            undo_operators()
            undo()
            raise

    def _adopt_recorded_operator_configs(self, state: Mapping[str, Any]) -> Callable[[], None]:
        """Let operators that changed a default resolve it as the checkpoint recorded
        (:class:`~zephon_core.ops.contract.AdoptsRecordedConfig`); kept only when the fingerprints
        then match. Returns what undoes it."""
        recorded = state["definition"].get("operators") if isinstance(state["definition"], Mapping) else None
        if state["fingerprint"] == ckpt.fingerprint(self.definition()) or not isinstance(recorded, list):
            return lambda: None
        undos: list[Callable[[], None]] = []
        for op, rec in zip(self.operators, recorded):
            config = rec.get("config") if isinstance(rec, Mapping) else None
            if isinstance(op, AdoptsRecordedConfig) and isinstance(config, Mapping):
                undo_one = op.adopt_recorded_config(config)
                if undo_one is not None:
                    undos.append(undo_one)

        def undo() -> None:
            for u in reversed(undos):
                u()

        if undos and state["fingerprint"] != ckpt.fingerprint(self.definition()):
            undo()
            return lambda: None
        return undo

    def _load_validated(self, state: Mapping[str, Any]) -> None:
        definition = self.definition()
        if state["fingerprint"] != ckpt.fingerprint(definition) and not _differ_only_by_absent_labels(
            state["definition"], definition
        ):
            diffs = ckpt.diff_definitions(state["definition"], definition) or ["(definitions differ)"]
            raise CheckpointError("checkpoint belongs to a different pipeline: " + "; ".join(diffs[:8]))
        if state.get("mid_round") and (state.get("world_size"), state.get("rank")) != (
            self._opts.dp_world_size,
            self._opts.dp_rank,
        ):
            raise CheckpointError(
                f"this checkpoint was taken in the middle of a round (rank {state.get('rank')} of "
                f"{state.get('world_size')}, after {state.get('step')} whole rounds): it can only resume the same rank "
                "of the same world size; take checkpoints at global-step boundaries to change world size"
            )
        layout = self._opts.layout()
        missing = [lane for lane in layout.owned if str(lane) not in state["lanes"]]
        if missing:
            raise CheckpointError(
                f"checkpoint has no state for lanes {missing} owned by rank {self._opts.dp_rank}: "
                "merge every rank's state_dict() with merge_checkpoints() first"
            )
        starts = {int(k): LaneStart.from_state(k, v) for k, v in state["lanes"].items()}
        estimates = self._checkpoint_estimates(state)
        skips = skipped_steps(state)
        probe = self._restored_source(state, estimates)
        self._check_positions(starts, layout, estimates, probe)
        source_state = dict(state.get("source") or {})
        source_state.pop("tokens_per_sample", None)
        self.source.load_state_dict(source_state)
        self._load_lane_sources(self.source, state)
        self._starts = starts
        self._token_estimates = estimates
        self._active = None
        self._skips, self._pending_skip = skips

    def _check_positions(
        self,
        starts: Mapping[int, LaneStart],
        layout: LaneLayout,
        estimates: dict[str, float] | None,
        restored: WorkSource | None = None,
    ) -> None:
        """Every lane's replay window must exist in this source (a window past the end would end the
        lane at once and silently lose its data). ``restored``: the source as the checkpoint leaves it."""
        source = self.source
        if estimates is not None and self.source.mixing_unit == "tokens":
            source = self.source.with_token_estimates(estimates)
        if restored is not None:
            source = restored
        k = self._resolve_window(source)
        for lane in layout.owned:
            s = starts[lane]
            if s.window == 0 and s.skip == 0:
                continue
            if s.window and not k:
                raise CheckpointError(f"checkpoint lane {lane}: window={s.window}, but this pipeline never flushes")
            first = layout.chunk(lane, s.first_chunk(k))
            if first >> CHUNK_BITS or source.chunk(first) is None:
                raise CheckpointError(
                    f"checkpoint lane {lane}: window {s.window} starts at chunk {first}, which is past the end of the "
                    "data: the checkpoint does not belong to this data (or was edited)"
                )

    def _checkpoint_estimates(self, state: Mapping[str, Any]) -> dict[str, float] | None:
        cal = state.get("calibration")
        est = cal.get("tokens_per_sample") if isinstance(cal, Mapping) else None
        if est is None:  # checkpoints of zephon-core 0.1 kept them with the source
            est = (state.get("source") or {}).get("tokens_per_sample")
        if est is None:
            return None
        try:
            return check_token_estimates(est, [d.name for d in self.source.datasets])
        except ConfigError as exc:
            raise CheckpointError(f"checkpoint calibration: {exc}") from exc

    def _with_lane_source(self, lane: int, entry: dict[str, Any]) -> dict[str, Any]:
        """A lane's checkpoint entry plus the source's part for that lane (merged by lane across ranks)."""
        source = self._active or self.source
        return dict(entry, source=source.lane_state_dict(lane)) if isinstance(source, LaneStateful) else entry

    def _load_lane_sources(self, source: WorkSource, state: Mapping[str, Any]) -> None:
        if isinstance(source, LaneStateful):
            source.load_lane_state_dicts({int(k): v.get("source") or {} for k, v in state["lanes"].items()})

    def _restored_source(self, state: Mapping[str, Any], estimates: dict[str, float] | None) -> WorkSource | None:
        """A configured copy of the source as the checkpoint leaves it (validating its state on the copy), or
        None when configuring gives the source itself (nothing to bind: the caller checks the source)."""
        probe = self._configure(self.source, estimates)
        if probe is self.source:
            return None
        source_state = dict(state.get("source") or {})
        source_state.pop("tokens_per_sample", None)
        probe.load_state_dict(source_state)
        self._load_lane_sources(probe, state)
        return probe
