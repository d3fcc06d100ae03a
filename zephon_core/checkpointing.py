"""A pipeline's side of checkpoints (whose fields :mod:`zephon_core.checkpoint.schema` alone writes and validates):
this rank's state, and resuming after checking the fingerprint, the lanes owned and every replay window."""

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
    from zephon_core.pipeline import Shared
else:
    Shared = object


def _differ_only_by_absent_labels(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether two definitions differ only by identity labels (``Pipeline.label``) one of them lacks entirely: a
    pipeline rebuilt from a recipe resumes one written in code, and back. Labels on both sides must match."""
    if ("labels" in saved) == ("labels" in current):
        return False
    unlabelled = [{k: v for k, v in d.items() if k != "labels"} for d in (saved, current)]
    return ckpt.fingerprint(unlabelled[0]) == ckpt.fingerprint(unlabelled[1])


class Checkpointing(Shared):
    """``state_dict`` and ``load_state_dict`` (see the module docstring)."""

    def state_dict(self) -> dict[str, Any]:
        """This rank's lanes as plain JSON-compatible data (see :mod:`zephon_core.checkpoint`). A manifest is
        written first, so every step before a checkpoint is on disk (a resumed run records the later ones again)."""
        if self._manifest is not None:
            self._manifest.flush(wait=True)
        opts, source = self._opts, self._active or self.source
        layout = opts.layout()
        if self._engine is not None:
            lane_states, next_lane = self._engine.lane_states(), self._engine.next_lane
        else:
            starts = {lane: self._starts.get(lane, LaneStart()) for lane in layout.owned}
            lane_states = {n: {"window": s.window, "skip": s.skip, "delivered": s.delivered} for n, s in starts.items()}
            next_lane = min(layout.owned, key=lambda x: (lane_states[x]["delivered"], x))
        lanes = {lane: lane_states[lane] for lane in layout.owned}
        if isinstance(source, LaneStateful):  # the source's part of each lane, merged by lane across ranks
            lanes = {lane: dict(entry, source=source.lane_state_dict(lane)) for lane, entry in lanes.items()}
        return checkpoint_dict(
            definition=self.definition(),
            num_lanes=opts.lanes,
            rank=opts.dp_rank,
            world_size=opts.dp_world_size,
            lanes=lanes,
            source=source.state_dict(),
            tokens_per_sample=self._token_estimates,
            next_lane=next_lane,
            skip_log=self._skips,
            pending_skip=self._pending_skip,
        )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint taken on any world size (merge ranks with ``merge_checkpoints``). Everything is
        validated before anything changes: a rejected checkpoint leaves the pipeline as it was."""
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
        """Let operators that changed a default resolve it as the checkpoint recorded (``AdoptsRecordedConfig``);
        kept only when the fingerprints then match. Returns what undoes it."""
        recorded = state["definition"].get("operators") if isinstance(state["definition"], Mapping) else None
        if state["fingerprint"] == ckpt.fingerprint(self.definition()) or not isinstance(recorded, list):
            return lambda: None
        undos: list[Callable[[], None]] = []
        for op, rec in zip(self.operators, recorded):
            config = rec.get("config") if isinstance(rec, Mapping) else None
            if isinstance(op, AdoptsRecordedConfig) and isinstance(config, Mapping):
                if (undo_one := op.adopt_recorded_config(config)) is not None:
                    undos.append(undo_one)

        def undo() -> None:
            for u in reversed(undos):
                u()

        if undos and state["fingerprint"] != ckpt.fingerprint(self.definition()):
            undo()
            return lambda: None
        return undo

    def _load_validated(self, state: Mapping[str, Any]) -> None:
        saved, definition = state["definition"], self.definition()
        same = state["fingerprint"] == ckpt.fingerprint(definition)
        if not same and not _differ_only_by_absent_labels(saved, definition):
            diffs = ckpt.diff_definitions(saved, definition) or ["(definitions differ)"]
            raise CheckpointError("checkpoint belongs to a different pipeline: " + "; ".join(diffs[:8]))
        here = (self._opts.dp_world_size, self._opts.dp_rank)
        if state.get("mid_round") and (state.get("world_size"), state.get("rank")) != here:
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
        self._check_positions(starts, layout, self._restored_source(state, estimates))
        self._load_source_state(self.source, state)
        self._starts = starts
        self._token_estimates = estimates
        self._active = None
        self._skips, self._pending_skip = skips

    def _check_positions(self, starts: Mapping[int, LaneStart], layout: LaneLayout, source: WorkSource) -> None:
        """Every lane's replay window must exist in ``source`` (one past the end would silently end the lane)."""
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

    def _load_source_state(self, source: WorkSource, state: Mapping[str, Any]) -> None:
        """The checkpoint's source state, and each lane's part of it, loaded into ``source``."""
        source_state = dict(state.get("source") or {})
        source_state.pop("tokens_per_sample", None)  # the pipeline's (zephon-core 0.1 kept them here)
        source.load_state_dict(source_state)
        if isinstance(source, LaneStateful):
            source.load_lane_state_dicts({int(k): v.get("source") or {} for k, v in state["lanes"].items()})

    def _restored_source(self, state: Mapping[str, Any], estimates: dict[str, float] | None) -> WorkSource:
        """The source configured as the checkpoint leaves it: a copy with the state loaded (nothing changes yet), or
        the source itself when configuring returns it (nothing to bind)."""
        probe = self._configure(self.source, estimates)
        if probe is not self.source:
            self._load_source_state(probe, state)
        return probe
