"""Shared chat data for the ``tokenize_chat`` tests: templates and conversations.

Templates (rendered by ``tokenize_chat`` and, in the reference test, by ``transformers``):

* ``CHATML``: ChatML with ``{% generation %}`` around each assistant reply and its ``<|im_end|>``;
* ``ZEPHYR``, ``LLAMA2`` and ``LLAMA3``: the published Zephyr, Llama 2 and Llama 3 chat templates, which have no
  generation tags (``tokenize_chat`` finds their assistant turns by rendering prefixes);
* ``ZEPHYR_TAGGED``, ``LLAMA2_TAGGED`` and ``LLAMA3_TAGGED``: the same templates with tags around what the model must
  produce after the generation prompt (reply and end-of-sequence token). They render the very same
  text, so ``transformers``' mask for a twin is the reference for the prefix mask of the original.

Conversations mix system, user and assistant turns, several assistant turns, empty and
whitespace-only content, unicode (accents, CJK, emoji, combining marks, right-to-left) and a reply
that spells a special token.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from zephon_core.testing.corpus import english_texts, technical_texts

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{ '\\n' }}"
    "{% else %}{{ message['content'] + '<|im_end|>' + '\\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# HuggingFaceH4/zephyr-7b-beta's template, as published (newlines after `}}` are part of the output)
ZEPHYR = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

ZEPHYR_TAGGED = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
' }}{% generation %}{{ message['content'] + eos_token }}{% endgeneration %}{{ '' }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

# meta-llama/Llama-2-7b-chat-hf's template, as published
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
LLAMA2_TAGGED = LLAMA2.replace(
    "{{ ' '  + content.strip() + ' ' + eos_token }}",
    "{% generation %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endgeneration %}",
)
assert LLAMA2_TAGGED != LLAMA2

# meta-llama/Meta-Llama-3-8B-Instruct's template, as published, and a tagged twin written out per role
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
LLAMA3_TAGGED = (
    "{% for message in messages %}{% if loop.index0 == 0 %}{{ bos_token }}{% endif %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}"
    "{% endgeneration %}{% else %}{{ message['content'] | trim + '<|eot_id|>' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

UNICODE = [
    "Grüße aus Köln, naïve café — déjà vu.",
    "日本語のテキストと中文混合。",
    "Emoji 😀🚀👩‍👩‍👧 and flags 🇫🇷",
    "e\u0301 combining marks, Å vs A\u030a",
    "مرحبا بالعالم (right to left)",
    "  leading and trailing spaces  ",
    "line one\n\nline two\n",
    "tabs\tand\u00a0non-breaking spaces",
]

HAND_WRITTEN: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"}],
    [
        {"role": "system", "content": "You are a terse assistant."},
        {"role": "user", "content": "2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "6"},
    ],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
    [{"role": "user", "content": "Say nothing."}, {"role": "assistant", "content": "   "}],
    [{"role": "user", "content": UNICODE[1]}, {"role": "assistant", "content": UNICODE[2]}],
    [
        {"role": "system", "content": UNICODE[4]},
        {"role": "user", "content": UNICODE[3]},
        {"role": "assistant", "content": UNICODE[0]},
    ],
    [{"role": "user", "content": "Spell the token."}, {"role": "assistant", "content": "It is <|endoftext|> here"}],
    [{"role": "user", "content": "Only a question, no answer yet"}],
    [
        {"role": "user", "content": "Multi-line?"},
        {"role": "assistant", "content": "Yes:\n- one\n- two\n\n```python\nprint('x')\n```"},
        {"role": "user", "content": "Thanks"},
        {"role": "assistant", "content": "You're welcome."},
    ],
]


def make_conversations(n: int, seed: int, max_chars: int = 300) -> list[list[dict[str, Any]]]:
    """``n`` alternating conversations (optional system turn, then user/assistant pairs), seeded."""
    rng = random.Random(seed)
    english, technical = english_texts(), technical_texts()

    def text() -> str:
        pick = rng.random()
        if pick < 0.1:
            return rng.choice(UNICODE)
        if pick < 0.15:
            return ""
        source = english if pick < 0.6 else technical
        t = rng.choice(source)
        return t[: rng.randint(1, max_chars)]

    convs = []
    for _ in range(n):
        conv: list[dict[str, Any]] = []
        if rng.random() < 0.4:
            conv.append({"role": "system", "content": text()})
        for _ in range(rng.randint(1, 4)):
            conv.append({"role": "user", "content": text()})
            conv.append({"role": "assistant", "content": text()})
        if rng.random() < 0.15:
            conv.append({"role": "user", "content": text()})  # ends on a question
        convs.append(conv)
    return convs


def chat_records(n: int = 240, seed: int = 3, max_chars: int = 300) -> list[dict[str, Any]]:
    """Records with a ``messages`` conversation and an ``n`` counter (the suite's default shape)."""
    convs = HAND_WRITTEN + make_conversations(n - len(HAND_WRITTEN), seed, max_chars)
    return [{"messages": c, "n": i} for i, c in enumerate(convs)]


def save_chatml_model(folder: Path) -> Path:
    """A model folder as Hugging Face saves one: GPT-2 plus ChatML's two control tokens, and a config."""
    from tokenizers import AddedToken
    from zephon_tokenize import gpt2_tokenizer

    tok = gpt2_tokenizer()
    tok.add_special_tokens([AddedToken("<|im_start|>", special=True), AddedToken("<|im_end|>", special=True)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "chat_template": CHATML,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="session")
def chat() -> SimpleNamespace:
    """The templates and helpers above, for test modules (conftest is not importable by name)."""
    return SimpleNamespace(
        CHATML=CHATML,
        ZEPHYR=ZEPHYR,
        ZEPHYR_TAGGED=ZEPHYR_TAGGED,
        LLAMA2=LLAMA2,
        LLAMA2_TAGGED=LLAMA2_TAGGED,
        LLAMA3=LLAMA3,
        LLAMA3_TAGGED=LLAMA3_TAGGED,
        HAND_WRITTEN=HAND_WRITTEN,
        UNICODE=UNICODE,
        make_conversations=make_conversations,
        chat_records=chat_records,
    )


@pytest.fixture(scope="session")
def chatml_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``tokenizer.json`` (GPT-2 + ``<|im_start|>``/``<|im_end|>``) and ``tokenizer_config.json``."""
    return save_chatml_model(tmp_path_factory.mktemp("chatml_model"))
