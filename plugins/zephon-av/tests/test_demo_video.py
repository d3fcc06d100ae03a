"""`zephon demo video`: registered through the plugin's entry point without importing PyAV, and run
through the ``zephon`` command line it prints what it did and passes its own determinism check."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile

import pytest


def test_registered_without_importing_pyav():
    code = (
        "import sys, json; from zephon_core.plugins import default_plugin_manager; "
        "reg = default_plugin_manager().registry.get('demo', 'video'); "
        "print(json.dumps([reg.package, reg.factory, 'av' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == '["zephon-av", "zephon_av.demo:main", false]'


def test_corpus_clips_move_and_are_deterministic():
    from zephon_av import demo

    images, _ = demo.photographs()
    a, b = demo.clip_frames(images, 1, 20), demo.clip_frames(images, 1, 20)
    assert a.shape == (20, demo.HEIGHT, demo.WIDTH, 3) and a.dtype.name == "uint8"
    assert (a == b).all()
    assert all((a[t] != a[t + 1]).any() for t in range(19))  # pans, zooms, crossfade: every frame differs
    sound = demo.speechlike(1.0, 0)
    assert sound.shape == (1, demo.SAMPLE_RATE) and 0.1 < float(abs(sound).max()) <= 0.301


@pytest.mark.slow
def test_zephon_demo_video_runs_and_self_checks(tmp_path, monkeypatch, capsys):
    from zephon_core.cli import main

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # worker processes too
    assert main(["demo", "video", "--quick"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Zephon video demo: 8 clips (")
    hashes = re.findall(r"global batch \d: sha256 ([0-9a-f]{64})", out)
    assert len(hashes) == 3 and len(set(hashes)) == 3
    assert len(re.findall(r"frames at \[(?:\d+\.\d\d, ){3}\d+\.\d\d\] s, audio from \d+\.\d\d s", out)) == 12
    assert "pixel_values_videos 2x192x1176, video_grid_thw [2, 8, 12], input_features 2x80x100" in out
    assert re.search(r"12 clips, 48 frames in [\d.]+ s: [\d.]+ clips/s", out)
    assert "3/3 global batch hashes match" in out and "ALL GLOBAL BATCH HASHES MATCHED" in out
    assert not list(tmp_path.glob("zephon_demo_video_*"))  # the corpus is removed afterwards


def test_bad_arguments_are_one_line_errors(capsys):
    from zephon_av import demo

    with pytest.raises(SystemExit) as exc:
        demo.main(["--steps", "0"])
    assert exc.value.code == 2
    assert "--steps and --clips must be at least 1" in capsys.readouterr().err
