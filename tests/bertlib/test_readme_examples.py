"""The READMEs' Python blocks run as written: the only changes are the placeholders a
reader fills in (the checkpoint path, the texts, labels and rows), and the pretraining
run's length (2,000 steps cut to 4, its warm-up and evaluation spacing with them), so
that the block runs in seconds."""

import re

import pytest
import torch

from bertbook.datasets import minilm_dir
from bertlib import BertConfig, BertForSequenceClassification, BertModel, BertTokenizer
from tools.chapters import ROOT

pytestmark = pytest.mark.slow  # fine-tuning and pretraining runs

TEXTS = ["a fine film", "a dull film", "good fun", "awful", "great acting", "poor plot"]


def python_blocks(readme: str) -> list[str]:
    text = (ROOT / readme).read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> str:
    """A small BERT with the real uncased vocabulary, where the READMEs say path/to/bert."""
    folder = tmp_path_factory.mktemp("bert")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=128)).save_pretrained(folder)
    BertTokenizer.from_pretrained(minilm_dir()).save_pretrained(folder)
    return str(folder)


def run_block(code: str, checkpoint: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    tokenizer = BertTokenizer.from_pretrained(checkpoint)
    rows = [{"input_ids": encoded.ids, "token_type_ids": encoded.type_ids, "labels": i % 2}
            for i, encoded in enumerate(map(tokenizer.encode, TEXTS))]
    namespace = {"texts": TEXTS, "labels": [1, 0, 1, 0, 1, 0], "dev_texts": TEXTS[:2],
                 "dev_labels": [1, 0], "documents": [" ".join(TEXTS * 20)] * 30,
                 "held_out": [" ".join(TEXTS * 20)] * 4, "train": rows, "dev": rows,
                 "model": BertForSequenceClassification.from_pretrained(checkpoint)}
    exec(compile(code.replace("path/to/bert", checkpoint), "README", "exec"), namespace)
    return namespace


def test_the_library_pages_block_runs(checkpoint, tmp_path, monkeypatch):
    (block,) = python_blocks("bertlib/README.md")  # the front door
    run_block(block, checkpoint, tmp_path, monkeypatch)
    assert (tmp_path / "runs" / "classifier" / "model" / "config.json").is_file()


SHORTER_RUN = {"steps=2000": "steps=4", "warmup_steps=200": "warmup_steps=1",
               "eval_every=400": "eval_every=2", "checkpoint_every=400": "checkpoint_every=2"}


def test_the_book_readmes_library_blocks_run(checkpoint, tmp_path, monkeypatch):
    blocks = python_blocks("README.md")
    assert len(blocks) == 4  # the front door, fine-tuning, pretraining, transformers' Trainer
    results = {}
    for code in blocks:
        for long, short in SHORTER_RUN.items():
            code = code.replace(long, short)
        results.update(run_block(code, checkpoint, tmp_path, monkeypatch))
    assert results["result"].state.step == 4
    assert (tmp_path / "my-run" / "model" / "tokenizer_config.json").is_file()
    assert (tmp_path / "out" / "final" / "config.json").is_file()
