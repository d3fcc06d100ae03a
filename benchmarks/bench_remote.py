"""Remote data: the same Parquet shards read from local disk, from S3, and from S3 behind 50/150 ms latency.

Training data lives in object stores, where every request waits a round trip before its first
byte. A loader hides that only if it keeps enough requests in flight, ahead of what the training
loop asks for. This benchmark reads one dataset — ``--shards`` Parquet files of ``--docs`` text
documents each, written by pyarrow — four ways, in one run, rounds interleaved:

* ``local``: from a local folder;
* ``s3``: from moto's S3 server on loopback (:mod:`zephon_testkit.s3`);
* ``s3+50ms`` / ``s3+150ms``: the same server behind :class:`~zephon_testkit.faultproxy.FaultProxy`
  holding back every answer 50 ms (an ordinary cross-region first byte) or 150 ms.

The pipeline is the same each time and left at its defaults: ``fetch → map_transform → shuffle →
batch(32)`` on threads, one dataset, a cold node cache (a fresh ``cache_dir`` per run). Printed per
way: the time from ``iter()`` to the first batch, and the steady throughput in samples/s from the
``--warmup``-th sample to the ``--samples``-th, with its ratio to local disk (the target: at 50 ms
at least 0.8 of it, at 150 ms at least 0.6, first batch within 3 s). Medians of ``--rounds`` rounds.

Two other loaders read the same documents the same four ways, each in a subprocess with its own
venv's python (``--peers``; a peer whose venv is missing is skipped with the reason):

* ``mosaic``: Mosaic Streaming's ``StreamingDataset`` over an MDS copy (``MDSWriter``, columns ``id``
  int and ``text`` str, shards of about the Parquet files' size) uploaded to the same bucket under
  ``mds/``: ``remote="s3://<bucket>/mds"``, a fresh ``local`` cache folder per run (local disk: the MDS
  folder itself as ``local``, no remote); Streaming's boto3 finds the server (or the proxy) through
  ``S3_ENDPOINT_URL``;
* ``litdata``: LitData's ``StreamingDataset("s3://<bucket>/litdata", storage_options={"endpoint_url":
  ...})`` over a copy written by ``litdata.optimize`` (one chunk per Parquet shard), a fresh
  ``cache_dir`` per run.

Both with ``shuffle=False`` (Zephon's pipeline above shuffles in a 1,024-sample buffer, which costs
it nothing in requests: the order of the shards it fetches is the same), the same map step,
``torch.utils.data.DataLoader(batch_size=32, num_workers=2)``, and the same measure: first batch
from the dataset's construction, steady samples/s from ``--warmup`` to ``--samples``. The S3 server
runs in this process; a peer gets only the endpoint URL and moto's fake credentials
(``AWS_ACCESS_KEY_ID=testing`` ...).

Run: ``python benchmarks/bench_remote.py`` (about two minutes on 2 cores; ``--quick`` for a smoke run).
Needs ``moto[server]``, ``s3fs`` and ``boto3`` (the storage test extra) and zephon-parquet. Peers:
``--mosaic-python`` (default ``/tmp/bench-mosaic/bin/python``, the venv of ``bench_vlm.py``'s docstring:
mosaicml-streaming, torch, pyarrow, pluggy, fsspec) and ``--litdata-python`` (default: this python,
when litdata is installed in it).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.testing.corpus import documents

BUCKET = "zephon-bench"
ROOT = Path(__file__).resolve().parents[1]
PEERS = ("mosaic", "litdata")
BATCH = 32


def write_shards(folder: Path, shards: int, docs: int) -> None:
    """``shards`` Parquet files of ``docs`` documents each (the offline corpus, repeated)."""
    base = documents()
    folder.mkdir(parents=True)
    for s in range(shards):
        recs = [{"id": s * docs + i, "text": base[(s * docs + i) % len(base)]["text"]} for i in range(docs)]
        pq.write_table(pa.Table.from_pylist(recs), folder / f"part-{s:03d}.parquet", row_group_size=512)


def text_length(record: dict[str, Any]) -> dict[str, Any]:
    """The map step: a little per-sample work, as a real pipeline has."""
    return {"id": record["id"], "chars": len(record["text"])}


def build(dataset: Dataset) -> Pipeline:
    ws = StaticMixtureWorkSource([dataset], mixture=MixtureSpec({"text": 1.0}), seed=3)
    return Pipeline(ws).fetch().map_transform(text_length).shuffle(buffer_size=1024, seed=5).batch(32)


def measure(dataset: Dataset, samples: int, warmup: int) -> tuple[float, float]:
    """(seconds to the first batch, steady samples/s from ``warmup`` to ``samples``)."""
    pipeline = build(dataset)
    try:
        start = time.perf_counter()
        it = iter(pipeline)
        first = None
        seen = 0
        t_warm = 0.0
        while seen < samples:
            batch = next(it)
            if first is None:
                first = time.perf_counter() - start
            seen += len(batch)
            if seen >= warmup and not t_warm:
                t_warm, at_warm = time.perf_counter(), seen
        rate = (seen - at_warm) / (time.perf_counter() - t_warm)
        return float(first or 0.0), rate
    finally:
        pipeline.close()


# --------------------------------------------------------------------------------------------
# Other loaders, each in a subprocess with its own venv's python.
# --------------------------------------------------------------------------------------------


def _streaming_base() -> Any:
    from peer_imports import streaming_base

    return streaming_base()


def _identity(row: dict[str, Any]) -> dict[str, Any]:
    return row


def peer_write(system: str, parquet: Path, out: Path) -> None:
    """Write the peer's copy of the Parquet documents into ``out`` (in the peer's venv)."""
    files = sorted(parquet.glob("*.parquet"))
    rows = [{"id": int(r["id"]), "text": r["text"]} for f in files for r in pq.read_table(f).to_pylist()]
    if system == "mosaic":
        sb: Any = _streaming_base()
        size_limit = max(1 << 20, int(1.1 * sum(f.stat().st_size for f in files) / len(files)))
        with sb.MDSWriter(out=str(out), columns={"id": "int", "text": "str"}, size_limit=size_limit) as w:
            for r in rows:
                w.write(r)
        return
    litdata: Any = importlib.import_module("litdata")
    # litdata.optimize keeps its cache in $TMPDIR: the caller points it at a scratch folder.
    litdata.optimize(
        fn=_identity,
        inputs=rows,
        output_dir=str(out),
        chunk_size=len(rows) // len(files),
        num_workers=1,
        mode="overwrite",
        start_method="fork",
        verbose=False,
    )


def peer_run(system: str, url: str, cache: str, samples: int, warmup: int) -> dict[str, float]:
    """(first batch seconds, steady samples/s) of ``system`` reading ``url`` (a folder or ``s3://``)."""
    from torch.utils.data import DataLoader

    start = time.perf_counter()
    remote = url.startswith("s3://")
    if system == "mosaic":
        sb: Any = _streaming_base()

        class MosaicMapped(sb.StreamingDataset):  # type: ignore[misc]
            def __getitem__(self, index: Any) -> Any:
                return text_length(super().__getitem__(index))

        ds: Any = MosaicMapped(
            remote=url if remote else None, local=cache if remote else url, shuffle=False, batch_size=BATCH
        )
    else:
        litdata: Any = importlib.import_module("litdata")

        class LitMapped(litdata.StreamingDataset):  # type: ignore[misc]
            def __getitem__(self, index: Any) -> Any:
                return text_length(super().__getitem__(index))

        options = {"endpoint_url": os.environ["S3_ENDPOINT_URL"]} if remote else {}
        if remote and options["endpoint_url"].startswith("http://"):
            # LitData builds its obstore S3Store (the chunk prefetch path) without allow_http, so it
            # cannot reach a plain-http endpoint such as moto on loopback: take the path LitData takes
            # where obstore is unusable, its boto3 client (which honours endpoint_url).
            downloader: Any = importlib.import_module("litdata.streaming.downloader")
            downloader._OBSTORE_AVAILABLE = False
        ds = LitMapped(url, cache_dir=cache if remote else None, storage_options=options, shuffle=False)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2, collate_fn=list)
    first = None
    seen = 0
    t_warm, at_warm = 0.0, 0
    for batch in loader:
        if first is None:
            first = time.perf_counter() - start
        seen += len(batch)
        if seen >= warmup and not t_warm:
            t_warm, at_warm = time.perf_counter(), seen
        if seen >= samples:
            break
    rate = (seen - at_warm) / (time.perf_counter() - t_warm)
    return {"first_batch_s": float(first or 0.0), "samples_per_s": rate}


def _peer_env(endpoint: str | None, tmp: Path) -> dict[str, str]:
    """The peer's environment: this repository on the path, scratch TMPDIR, moto's fake credentials."""
    from zephon_testkit.s3 import FAKE_ENV

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    env.update(FAKE_ENV, TMPDIR=str(tmp))
    if endpoint:
        env.update(S3_ENDPOINT_URL=endpoint, AWS_ENDPOINT_URL=endpoint)
    return env


def _peer(python: str, argv: list[str], endpoint: str | None, tmp: Path, timeout: float) -> dict[str, Any]:
    """Run ``bench_remote.py --peer ...`` in ``python``; its RESULT line, or ``{"error": ...}``."""
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(
            [python, __file__, "--peer", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_peer_env(endpoint, tmp),
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        text = (out.stderr or out.stdout).strip().splitlines()
        raised = [ln for ln in text if re.match(r"[\w.]+(Error|Exception)\b", ln)]  # the exception lines
        return {"error": (raised[-1] if raised else " | ".join(text[-3:]))[-300:]}
    return dict(json.loads(lines[-1][len("RESULT ") :]))


def _peer_available(system: str, python: str) -> str | None:
    """None when the peer's venv can run it, else why not."""
    if not Path(python).exists():
        return f"no venv at {python}"
    module = "streaming" if system == "mosaic" else "litdata"
    code = f"import importlib.util, torch, pyarrow, pluggy, fsspec; assert importlib.util.find_spec({module!r})"
    if subprocess.run([python, "-c", code], capture_output=True).returncode != 0:
        return f"{module} (with torch, pyarrow, pluggy, fsspec) is not importable by {python}"
    return None


@contextlib.contextmanager
def servers(
    local: Path, delays: list[float], copies: dict[str, Path] | None = None
) -> Iterator[dict[str, tuple[str, dict[str, Any]]]]:
    """Every way to reach the data: name → (url, storage_options); ``copies`` (prefix → folder) go up too."""
    from zephon_testkit.faultproxy import Fault, FaultProxy, always, via
    from zephon_testkit.s3 import moto_s3

    with moto_s3(BUCKET) as s3, contextlib.ExitStack() as stack:
        s3.upload_dir(str(local), "text")
        for prefix, folder in (copies or {}).items():
            s3.upload_dir(str(folder), prefix)
        ways: dict[str, tuple[str, dict[str, Any]]] = {
            "local": (str(local), {}),
            "s3": (s3.url("text"), dict(s3.storage_options)),
        }
        for d in delays:
            proxy = stack.enter_context(FaultProxy(s3.endpoint, always(Fault.DELAY), delay=d))
            ways[f"s3+{d * 1000:.0f}ms"] = (s3.url("text"), via(s3.storage_options, proxy.endpoint))
        yield ways


def _endpoint(options: dict[str, Any]) -> str | None:
    """The S3 endpoint (server or proxy) of a way's storage_options; None for local disk."""
    return (options.get("client_kwargs") or {}).get("endpoint_url")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        if sys.argv[2] == "write":
            peer_write(sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
            print("RESULT {}", flush=True)
        else:
            peer, where, folder, samples, warmup = sys.argv[3:8]
            print("RESULT " + json.dumps(peer_run(peer, where, folder, int(samples), int(warmup))), flush=True)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shards", type=int, default=24)
    ap.add_argument("--docs", type=int, default=4000, help="documents per shard")
    ap.add_argument("--samples", type=int, default=60000, help="samples read per run")
    ap.add_argument("--warmup", type=int, default=6000, help="samples before the steady window")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delays", default="0.05,0.15", help="proxy latencies in seconds, comma-separated")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 6 shards, one round")
    ap.add_argument("--peers", default=",".join(PEERS), help="other loaders to run too: mosaic, litdata or none")
    ap.add_argument("--mosaic-python", default="/tmp/bench-mosaic/bin/python", help="python of the Streaming venv")
    ap.add_argument("--litdata-python", default=sys.executable, help="python of the LitData venv (default: this)")
    ap.add_argument("--timeout", type=float, default=600, help="limit for one peer run, in seconds")
    args = ap.parse_args()
    if args.quick:
        args.shards, args.docs, args.samples, args.warmup, args.rounds = 6, 2000, 8000, 1000, 1
    delays = [float(x) for x in args.delays.split(",") if x]
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    if set(peers) - set(PEERS):
        ap.error(f"--peers: unknown {sorted(set(peers) - set(PEERS))}; the peers are {', '.join(PEERS)} (or none)")
    pythons = {"mosaic": args.mosaic_python, "litdata": args.litdata_python}
    with tempfile.TemporaryDirectory(prefix="zephon-remote-") as tmp:
        root = Path(tmp)
        write_shards(root / "text", args.shards, args.docs)
        copies: dict[str, Path] = {}
        for p in list(peers):
            why = _peer_available(p, pythons[p])
            if why is None:
                copy = root / ("mds" if p == "mosaic" else "litdata")
                res = _peer(pythons[p], ["write", p, str(root / "text"), str(copy)], None, root / f"tmp-{p}", 1200)
                why = res.get("error")
            if why:
                print(f"  {p}: skipped ({why})")
                peers.remove(p)
            else:
                copies[copy.name] = copy
        first: dict[str, list[float]] = {}
        rates: dict[str, list[float]] = {}
        peer_results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        with servers(root / "text", delays, copies) as ways:
            for r in range(args.rounds):
                for name, (url, options) in ways.items():
                    cache = root / f"cache-{name}-{r}"
                    ds = Dataset.from_path("text", url, format="parquet", storage_options=options, cache_dir=str(cache))
                    f, rate = measure(ds, args.samples, args.warmup)
                    first.setdefault(name, []).append(f)
                    rates.setdefault(name, []).append(rate)
                    print(f"  round {r + 1} {name:>9}: first batch {f:5.2f} s, {rate:9,.0f} samples/s", flush=True)
                    for p in peers:
                        prefix = "mds" if p == "mosaic" else "litdata"
                        endpoint = _endpoint(options)
                        where = f"s3://{BUCKET}/{prefix}" if endpoint else str(copies[prefix])
                        argv = [
                            "run",
                            p,
                            where,
                            str(root / f"cache-{p}-{name}-{r}"),
                            str(args.samples),
                            str(args.warmup),
                        ]
                        res = _peer(pythons[p], argv, endpoint, root / f"tmp-{p}-{name}-{r}", args.timeout)
                        peer_results.setdefault((p, name), []).append(res)
                        what = res.get("error") or (
                            f"first batch {res['first_batch_s']:5.2f} s, {res['samples_per_s']:9,.0f} samples/s"
                        )
                        print(f"  round {r + 1} {name:>9} {p}: {what}", flush=True)
        local = statistics.median(rates["local"])
        print(f"\n{args.shards} shards x {args.docs} docs, {args.samples} samples per run, steady after {args.warmup}")
        print(f"{'system':>8} | {'way':>9} | {'first batch':>11} | {'samples/s':>10} | {'vs local':>8}")
        for name in rates:
            rate = statistics.median(rates[name])
            print(
                f"{'zephon':>8} | {name:>9} | {statistics.median(first[name]):9.2f} s | {rate:10,.0f} | {rate / local:7.2f}x"
            )
        for p in peers:
            ok_local = [x["samples_per_s"] for x in peer_results.get((p, "local"), []) if "error" not in x]
            for name in ways:
                runs = [x for x in peer_results.get((p, name), []) if "error" not in x]
                if not runs:
                    errors = [x["error"] for x in peer_results.get((p, name), [])]
                    print(f"{p:>8} | {name:>9} | error: {errors[0][:100] if errors else 'not run'}")
                    continue
                rate = statistics.median(x["samples_per_s"] for x in runs)
                fb = statistics.median(x["first_batch_s"] for x in runs)
                vs = f"{rate / statistics.median(ok_local):7.2f}x" if ok_local else "      —"
                print(f"{p:>8} | {name:>9} | {fb:9.2f} s | {rate:10,.0f} | {vs}")
        print(
            f"peers: shuffle=False, DataLoader(batch_size={BATCH}, num_workers=2); 'vs local' is each system's own local disk"
        )


if __name__ == "__main__":
    main()
