"""ScheduledMixtureWorkSource: a mixture whose weights follow a schedule and may be steered by the trainer.

Each lane draws from each dataset through a stream of its own, so a lane's chunks depend on that
lane's mixture alone. That is what lets a trainer-steered update take effect at a position each
rank can compute from its own lanes (:meth:`ScheduledMixtureWorkSource.update_mixture`):

* **Lane streams.** A dataset's draws (over all epochs) are dealt to the lanes in slabs of
  ``chunk_size``: lane ``l``'s ``k``-th draw is draw ``(k // S)·S·L + l·S + k % S`` of the dataset's
  shuffled order (``S`` = chunk_size, ``L`` = lanes). Every sample of an epoch goes to exactly one
  lane, and a chunk's draws from a dataset stay within one or two runs of that order (locality).
* **Lane mixture.** Lane positions count the lane's own samples. A schedule breakpoint at global
  sample ``B`` becomes, in lane ``l``, the number of lane-``l`` positions before global position
  ``B`` (exact: chunk ``g`` covers global positions ``[g·S, (g+1)·S)``), so every lane changes
  weights at the same global position. The lane's draw counts at any position come from a
  :class:`~zephon_curricula.quota.QuotaPlan` in closed form, piece by piece.
* **Updates.** An update names, per lane, the lane-local chunk from which it applies; from there it
  replaces the lane's weights (later scheduled breakpoints no longer apply to that lane).
* **Exhaustion.** Where a lane's stream of a dataset runs out is computed from the plan; ``stop``
  ends the lane there, ``redistribute`` inserts a piece without that dataset (see
  ``check_exhaustion`` in :mod:`zephon_core.plugin_api`).

Chunk ``g`` is therefore a pure function of the configuration, the update log and ``g``; the
checkpoint holds the update log (global) and each lane's effect chunks (per lane), a few bytes per
update whatever the progress or the number of breakpoints.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import BaseWorkSource, CheckpointError, Chunk, ConfigError, Dataset
from zephon_core.plugin_api import (
    DEFAULT_WINDOW_TOKENS,
    ChunkSize,
    ChunkSizing,
    Exhausted,
    ShuffleBlockSize,
    check_block_size,
    check_exhaustion,
    check_token_estimates,
    describe_block_size,
    describe_exhaustion,
    locate_draws,
    make_order,
    mean_tokens,
)
from zephon_curricula.quota import QuotaPlan, integer_shares
from zephon_curricula.schedule import MixtureSchedule, Unit, check_weights

DEFAULT_LEAD_WINDOWS = 2
"""Windows past a lane's last delivered microbatch at which a trainer-steered update takes effect."""


@dataclass
class LanePlan:
    """One lane's mixture: the quota plan, where the lane ends (None: never), and who ran out where."""

    quota: QuotaPlan
    end: int | None
    exhausted: list[Exhausted]


@dataclass(frozen=True)
class UpdateLog:
    """Trainer-steered updates (``{"step", "weights"}``, oldest first) and, per known lane, the lane-local
    chunk at which each applies. Replaced whole on every change, so a reader sees one consistent log."""

    updates: tuple[dict[str, Any], ...]
    effects: dict[int, tuple[int, ...]]


def interleave(counts: Sequence[int]) -> np.ndarray:
    """Components spread evenly over ``sum(counts)`` positions (smooth round robin of these counts)."""
    keys = np.concatenate([(2 * np.arange(n) + 1) / (2 * n) for n in counts if n] or [np.zeros(0)])
    comp = np.concatenate([np.full(n, d, dtype=np.int64) for d, n in enumerate(counts) if n] or [np.zeros(0, np.int64)])
    return comp[np.lexsort((comp, keys))]


class ScheduledMixtureWorkSource(ChunkSizing, BaseWorkSource):
    """Datasets mixed by a :class:`~zephon_curricula.schedule.MixtureSchedule`, steerable during a run.

    Args:
        datasets: the components, each with a unique name; each must have a positive weight
            somewhere in the schedule.
        schedule: the weights over progress; default: proportional to dataset sizes, fixed.
        chunk_size: pointers per chunk (the unit of lane routing, replay and checkpointing): an int,
            ``"auto"`` or None (see ``ChunkSizing`` in :mod:`zephon_core.plugin_api`; ``"auto"`` sizes for the
            schedule's piece with the fewest tokens per sample).
        seed: seeds every permutation.
        shuffle: shuffle each dataset (``False`` keeps file order).
        shuffle_block_size: ``"shard"``, an int, ``"auto"`` or ``"global"`` (see ``make_order`` in :mod:`zephon_core.plugin_api`).
        exhaustion: ``"stop"``, ``"repeat"``, ``"redistribute"`` or a dict per dataset name
            (see ``check_exhaustion`` in :mod:`zephon_core.plugin_api`).
        tokens_per_sample: frozen estimates for a schedule in tokens (else the pipeline calibrates).
        update_lead_windows: how many windows after a lane's last delivered microbatch a
            trainer-steered update takes effect (the feeder never runs further ahead than that).
        window_tokens: tokens one window holds at least with ``"auto"`` chunks.

    ``load_state_dict`` restores the update log into this object: build one source per pipeline.
    """

    plan_version: int = 0
    """Grows by one whenever the plans are reset (the pipeline drops chunks its prefetch computed under older plans)."""

    def __init__(
        self,
        datasets: Sequence[Dataset],
        schedule: MixtureSchedule | None = None,
        chunk_size: ChunkSize = None,
        seed: int = 0,
        *,
        shuffle: bool = True,
        shuffle_block_size: ShuffleBlockSize = "auto",
        exhaustion: Any = "stop",
        tokens_per_sample: Mapping[str, float] | None = None,
        update_lead_windows: int = DEFAULT_LEAD_WINDOWS,
        window_tokens: int = DEFAULT_WINDOW_TOKENS,
    ) -> None:
        super().__init__(datasets)
        names = [d.name for d in self.datasets]
        if schedule is None:
            schedule = MixtureSchedule([(0, {d.name: float(d.num_samples) for d in self.datasets})])
        if not isinstance(schedule, MixtureSchedule):
            raise ConfigError(f"schedule must be a MixtureSchedule, got {type(schedule).__name__}")
        unknown = set(schedule.names) - set(names)
        if unknown:
            raise ConfigError(f"the schedule names datasets that are not in the source: {sorted(unknown)}")
        never = [n for n in names if all(w.get(n, 0.0) == 0 for _, w in schedule.breakpoints)]
        if never:
            raise ConfigError(f"datasets {never} have weight 0 at every breakpoint of the schedule: leave them out")
        self._init_chunking(chunk_size, window_tokens)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        lead = update_lead_windows
        if not isinstance(lead, int) or isinstance(lead, bool) or lead < 1:
            raise ConfigError(f"update_lead_windows must be an int >= 1, got {lead!r}")
        self.schedule = schedule
        self.seed = seed
        self.shuffle = shuffle
        self.shuffle_block_size = check_block_size(shuffle_block_size)
        self.exhaustion = check_exhaustion(exhaustion, names)
        self.update_lead_windows = lead
        self.tokens_per_sample: dict[str, float] | None = None
        if tokens_per_sample is not None:
            self.tokens_per_sample = check_token_estimates(tokens_per_sample, names)
        self.num_lanes = 1
        self._orders = [make_order(d.sizes, seed, d.name, self.shuffle_block_size, shuffle) for d in self.datasets]
        self._log = UpdateLog((), {})
        self._reset_plans()

    def _reset_plans(self) -> None:
        # A new dict: a plan being built from the old log lands in the old dict, never in this one.
        self._plans: dict[int, LanePlan] = {}
        self._pieces: list[tuple[int, list[float]]] | None = None
        self.plan_version += 1  # work.contract.PlanVersioned: chunks computed early under the old plans are dropped

    # -- configuration copies ------------------------------------------------------------------
    @property
    def mixing_unit(self) -> Unit:
        return self.schedule.unit

    def target_weights(self) -> dict[str, float]:
        """The weights at the start of the schedule (in :attr:`mixing_unit`): operators that hold a
        mixture fixed (``ensure_mixture``) do not suit a schedule."""
        w = self.schedule.weights_at(0)
        return {d.name: float(w.get(d.name, 0.0)) for d in self.datasets}

    def _clone(self) -> ScheduledMixtureWorkSource:
        clone = copy.copy(self)
        clone._reset_plans()  # the log is immutable: sharing it is safe
        return clone

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> ScheduledMixtureWorkSource:
        """A copy whose token breakpoints and weights become samples through these frozen estimates."""
        clone = self._clone()
        clone.tokens_per_sample = check_token_estimates(tokens_per_sample, [d.name for d in self.datasets])
        return clone

    def with_lanes(self, num_lanes: int) -> ScheduledMixtureWorkSource:
        """A copy that deals each dataset's draws to ``num_lanes`` lanes (the pipeline binds its lanes)."""
        if not isinstance(num_lanes, int) or isinstance(num_lanes, bool) or num_lanes < 1:
            raise ConfigError(f"num_lanes must be an int >= 1, got {num_lanes!r}")
        clone = self._clone()
        clone.num_lanes = num_lanes
        return clone

    # -- lane plans ------------------------------------------------------------------------------
    def _sample_weights(self, weights: Mapping[str, float]) -> list[float]:
        names = [d.name for d in self.datasets]
        total = sum(weights.values())
        w = [weights.get(n, 0.0) / total for n in names]
        if self.schedule.unit == "tokens":
            if self.tokens_per_sample is None:
                raise ConfigError("weights in tokens need token estimates (calibration or tokens_per_sample=)")
            w = [x / self.tokens_per_sample[n] for x, n in zip(w, names)]
        return w

    def _fewest_tokens_per_sample(self) -> float:
        names = [d.name for d in self.datasets]
        est = self.tokens_per_sample or {}
        tps = [est[n] for n in names]
        per_piece = []
        for _, w in self.schedule.unit_pieces(names):
            sample_w = [x / t for x, t in zip(w, tps)] if self.schedule.unit == "tokens" else w
            per_piece.append(mean_tokens(sample_w, tps))
        return min(per_piece)

    def global_pieces(self) -> list[tuple[int, list[float]]]:
        """The schedule as pieces of constant sample weights over global sample positions."""
        if self._pieces is None:
            self._pieces = self.schedule.pieces([d.name for d in self.datasets], self.tokens_per_sample)
        return self._pieces

    def lane_position(self, lane: int, global_position: int) -> int:
        """How many of ``lane``'s positions lie before global sample position ``global_position``."""
        L, S = self.num_lanes, self.chunk_size
        g, o = divmod(global_position, S)
        full = (g - lane + L - 1) // L if g > lane else 0
        return full * S + (o if g % L == lane else 0)

    def _lane_draws(self, lane: int, d: int) -> int:
        """Draws of dataset ``d`` lane ``lane`` gets in one epoch (the slabs dealt to it)."""
        S, L = self.chunk_size, self.num_lanes
        rounds, rest = divmod(self.datasets[d].num_samples, S * L)
        return rounds * S + min(S, max(0, rest - lane * S))

    def _base_pieces(self, lane: int) -> list[tuple[int, list[float]]]:
        pieces: list[tuple[int, list[float]]] = []
        for start, w in self.global_pieces():
            p = self.lane_position(lane, start)
            if pieces and pieces[-1][0] == p:
                pieces.pop()
            pieces.append((p, w))
        log = self._log  # one snapshot: update_mixture replaces the log whole, from another thread
        effects = log.effects.get(lane, ())
        if len(effects) < len(log.updates):
            raise ConfigError(
                f"lane {lane}: where {len(log.updates) - len(effects)} trainer-steered update(s) take effect is not "
                "known on this rank (lanes of other ranks cannot be computed here)"
            )
        for update, chunk in zip(log.updates, effects):
            x = chunk * self.chunk_size
            pieces = [p for p in pieces if p[0] < x] + [(x, self._sample_weights(update["weights"]))]
        return pieces

    @staticmethod
    def _quota(pieces: list[tuple[int, list[float]]]) -> QuotaPlan:
        return QuotaPlan([(s, integer_shares(w) if any(x > 0 for x in w) else (0,) * len(w)) for s, w in pieces])

    def lane_plan(self, lane: int) -> LanePlan:
        """Lane ``lane``'s mixture with its exhaustion events (built once, then cached)."""
        plans = self._plans
        plan = plans.get(lane)
        if plan is None:
            plan = plans[lane] = self._build_plan(lane)
        return plan

    def _build_plan(self, lane: int) -> LanePlan:
        pieces = self._base_pieces(lane)
        gone: set[int] = set()
        events: list[Exhausted] = []
        quota = self._quota(pieces)
        end = quota.dead_from
        while True:
            due = []
            for d, ds in enumerate(self.datasets):
                if d in gone or self.exhaustion[ds.name] == "repeat":
                    continue
                k = self._lane_draws(lane, d)
                pos = quota.position_of_draw(d, k)
                if pos is not None and (end is None or pos < end):
                    due.append((pos, d, k))
            if not due:
                break
            pos, d, k = min(due)
            policy = self.exhaustion[self.datasets[d].name]
            events.append(Exhausted(lane, self.datasets[d].name, k, pos, self._chunk_at(lane, pos), policy))
            if policy == "stop":
                end = pos
                break
            gone.add(d)  # redistribute: pieces without d from pos on; earlier pieces (and counts) are unchanged
            cur = next(w for s, w in reversed(pieces) if s <= pos)
            later = [(pos, cur)] + [p for p in pieces if p[0] > pos]
            pieces = [p for p in pieces if p[0] < pos] + [
                (s, [0.0 if j == d else x for j, x in enumerate(w)]) for s, w in later
            ]
            quota = self._quota(pieces)
            end = quota.dead_from
        return LanePlan(quota, end, events)

    def _chunk_at(self, lane: int, position: int) -> int:
        return (position // self.chunk_size) * self.num_lanes + lane

    # -- chunks ------------------------------------------------------------------------------------
    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` (lane ``number mod lanes``), or None past that lane's end."""
        local, lane = divmod(number, self.num_lanes)
        plan = self.lane_plan(lane)
        start = local * self.chunk_size
        stop = start + self.chunk_size
        if plan.end is not None:
            stop = min(stop, plan.end)
        if stop <= start:
            return None
        before = plan.quota.counts(start)
        cuts = [start, *plan.quota.starts_within(start, stop), stop]  # weights change: interleave each part
        counts = [before] + [plan.quota.counts(p) for p in cuts[1:]]
        comp = np.concatenate([interleave([b - a for a, b in zip(lo, hi)]) for lo, hi in itertools.pairwise(counts)])
        k = np.empty(len(comp), dtype=np.int64)
        for d in range(len(self.datasets)):
            m = comp == d
            k[m] = before[d] + np.arange(int(m.sum()))
        S, L = self.chunk_size, self.num_lanes
        draw = (k // S) * (S * L) + lane * S + k % S
        shard, index = locate_draws(self._orders, [d.num_samples for d in self.datasets], comp, draw)
        return Chunk(number, comp.astype(np.int32), shard, index)

    def exhaustion_report(self, lanes: Iterable[int] | None = None) -> list[Exhausted]:
        """Who ran out where, in the given lanes (default: every lane), in order of position."""
        lanes = range(self.num_lanes) if lanes is None else lanes
        return sorted((e for lane in lanes for e in self.lane_plan(lane).exhausted), key=lambda e: (e.position, e.lane))

    # -- trainer-steered updates -----------------------------------------------------------------
    def update_mixture(self, weights: Mapping[str, float], effects: Mapping[int, int], step: int | None = None) -> None:
        """From lane-local chunk ``effects[lane]`` on, lane ``lane`` mixes by ``weights`` (in the schedule's unit).

        Chunks before those are unchanged, so an update is safe while the pipeline runs as long as no
        chunk at or past its effect was computed (the pipeline's feeder guarantees that). Datasets not
        named get weight 0.
        """
        clean = check_weights(weights, "update_mixture")
        names = [d.name for d in self.datasets]
        unknown = set(clean) - set(names)
        if unknown:
            raise ConfigError(f"update_mixture: unknown datasets {sorted(unknown)}; the source has {names}")
        log = self._log
        for lane, chunk in effects.items():
            prev = log.effects.get(lane, ())
            if prev and chunk < prev[-1]:
                raise ConfigError(
                    f"update_mixture: lane {lane} would apply an update at chunk {chunk}, before {prev[-1]}"
                )
        new_effects = dict(log.effects)
        for lane, chunk in effects.items():
            new_effects[lane] = (*log.effects.get(lane, ()), int(chunk))
        update = {"step": step, "weights": {n: clean.get(n, 0.0) for n in names}}
        self._log = UpdateLog((*log.updates, update), new_effects)
        self._reset_plans()

    @property
    def updates(self) -> list[dict[str, Any]]:
        """The log of trainer-steered updates (step, weights), oldest first."""
        return copy.deepcopy(list(self._log.updates))

    # -- identity and state ------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """JSON-able definition for the pipeline fingerprint (long schedules by digest)."""
        return {
            "type": "ScheduledMixtureWorkSource",
            "datasets": [d.describe() for d in self.datasets],
            "schedule": self.schedule.describe(),
            **self.describe_chunking(),
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_block_size": describe_block_size(self.shuffle_block_size),
            "exhaustion": describe_exhaustion(self.exhaustion),
            "update_lead_windows": self.update_lead_windows,
        }

    def state_dict(self) -> dict[str, Any]:
        """The update log (the same on every rank); where each applies is per lane (:meth:`lane_state_dict`)."""
        return {"updates": copy.deepcopy(list(self._log.updates))}

    def lane_state_dict(self, lane: int) -> dict[str, Any]:
        """Lane ``lane``'s part of the checkpoint: the lane-local chunk at which each update applies."""
        return {"update_chunks": list(self._log.effects.get(lane, ()))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the update log (validated fully before anything changes)."""
        if not isinstance(state, Mapping):
            raise CheckpointError(f"work source state must be a dict, got {type(state).__name__}")
        extra = set(state) - {"updates"}
        if extra:
            raise CheckpointError(f"ScheduledMixtureWorkSource state has unknown keys {sorted(extra)}")
        updates = state.get("updates", [])
        if not isinstance(updates, list):
            raise CheckpointError("work source state: 'updates' must be a list")
        names = [d.name for d in self.datasets]
        clean = []
        for i, u in enumerate(updates):
            if not isinstance(u, Mapping) or set(u) != {"step", "weights"}:
                raise CheckpointError(f"work source state: update {i} must be {{'step', 'weights'}}, got {u!r}")
            try:
                w = check_weights(u["weights"], f"update {i}")
            except ConfigError as exc:
                raise CheckpointError(f"work source state: {exc}") from None
            if set(w) - set(names):
                raise CheckpointError(
                    f"work source state: update {i} names unknown datasets {sorted(set(w) - set(names))}"
                )
            clean.append({"step": u["step"], "weights": {n: w.get(n, 0.0) for n in names}})
        self._log = UpdateLog(tuple(clean), {})
        self._reset_plans()

    def load_lane_state_dicts(self, states: Mapping[int, Any]) -> None:
        """Restore each lane's effect chunks; every lane must name one per update of the log."""
        effects: dict[int, tuple[int, ...]] = {}
        for lane, st in states.items():
            chunks = st.get("update_chunks") if isinstance(st, Mapping) else None
            if not isinstance(chunks, list) or len(chunks) != len(self._log.updates):
                raise CheckpointError(
                    f"checkpoint lane {lane}: expected 'update_chunks' with {len(self._log.updates)} entries "
                    f"(one per trainer-steered update), got {chunks!r}"
                )
            if any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in chunks) or chunks != sorted(chunks):
                raise CheckpointError(f"checkpoint lane {lane}: 'update_chunks' must be non-decreasing ints >= 0")
            effects[int(lane)] = tuple(chunks)
        self._log = UpdateLog(self._log.updates, effects)
        self._reset_plans()
