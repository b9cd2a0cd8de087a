"""bertlib as a practitioner meets it: the front door, a library that needs no book
packages, a model edge that neither splits a compiled graph nor waits for the device, and
texts in, labels out."""

import subprocess
import sys
import textwrap

import pytest
import torch

import bertlib
from bertbook.datasets import minilm_dir, rotten_tomatoes

FRONT_DOOR = ("BertConfig", "BertTokenizer", "BertModel", "BertForPreTraining",
              "BertForMaskedLM", "BertForSequenceClassification", "BertForTokenClassification",
              "BertForQuestionAnswering", "Trainer", "TrainingConfig")
BOOK_ONLY = ("bertbook", "tools", "matplotlib", "jupyter", "jupytext", "IPython", "bertviz",
             "transformers", "gensim", "mwparserfromhell", "nbformat", "nbclient")
# The one module that exists to bridge to another library: without it, it says what to install.
BRIDGES = {"bertlib.integrations": "pip install transformers accelerate"}


def test_the_front_door_has_the_practitioners_names():
    assert set(FRONT_DOOR) <= set(bertlib.__all__)
    assert all(hasattr(bertlib, name) for name in bertlib.__all__)


def test_the_library_imports_with_no_book_package_installed():
    """Every bertlib module imports with the book's packages made unimportable, as in a
    fresh environment where only `pip install bertlib` ran; the bridge to transformers'
    Trainer instead says what to install."""
    script = textwrap.dedent(f"""
        import importlib, pkgutil, sys
        BLOCKED = {BOOK_ONLY!r}

        class Blocker:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"{{name}} is not installed (blocked)")

        sys.meta_path.insert(0, Blocker())
        import bertlib
        from bertlib import {", ".join(FRONT_DOOR)}
        for module in pkgutil.walk_packages(bertlib.__path__, "bertlib."):
            if module.name in {BRIDGES!r}:
                try:
                    importlib.import_module(module.name)
                except ImportError as error:
                    assert {BRIDGES!r}[module.name] in str(error), error
                else:
                    raise AssertionError(module.name + " imported without its client")
            elif not module.name.endswith("__main__"):
                importlib.import_module(module.name)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = bertlib.BertConfig.preset("bert-tiny", vocab_size=500, max_position_embeddings=32)
    return bertlib.BertModel(config).eval()


def test_the_model_edge_reads_no_values_off_the_device(tiny):
    """On a non-CPU device the edge checks shapes and types only: reading a value there
    would wait for the device every step. A meta tensor has no values at all, so a
    forward pass on the meta device fails if any check reads one."""
    meta = bertlib.BertModel(tiny.config).to("meta").eval()
    ids = torch.zeros(2, 8, dtype=torch.long, device="meta")
    out = meta(ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
    assert out.last_hidden_state.shape == (2, 8, tiny.config.hidden_size)


def test_the_encoder_compiles_without_graph_breaks(tiny):
    """The same model that refuses bad input in the library's words compiles whole: its
    checks sit at the edge, out of the traced graph."""
    with pytest.raises(bertlib.InputError, match="must lie in 0.."):
        tiny(torch.full((1, 4), tiny.config.vocab_size))
    ids = torch.randint(5, 500, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, 10:] = 0
    explanation = torch._dynamo.explain(tiny)(ids, attention_mask=mask,
                                              token_type_ids=torch.zeros_like(ids))
    assert explanation.graph_break_count == 0, explanation.break_reasons


def _masked_batch(config, rows: int = 3, length: int = 16) -> dict[str, torch.Tensor]:
    """A batch as chapter 05's collator makes it: a few hidden pieces a row, and their
    positions in 4 slots a row (spare slots point at position 0, never hidden)."""
    ids = torch.randint(5, config.vocab_size, (rows, length))
    labels = torch.full_like(ids, -100)
    positions = torch.tensor([[2, 5, 9, 0], [1, 3, 0, 0], [4, 7, 11, 14]])
    for row, chosen in enumerate(positions):
        chosen = chosen[chosen > 0]
        labels[row, chosen] = ids[row, chosen]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels,
            "masked_positions": positions}


@pytest.mark.parametrize("model_class", ["BertForMaskedLM", "BertForPreTraining"])
def test_the_masked_lm_in_training_compiles_whole(tiny, model_class):
    """With the collator's masked_positions the head gathers a fixed number of pieces a
    row: no data-dependent shape, so no graph break. Labels alone still work, eagerly."""
    torch.manual_seed(0)
    model = getattr(bertlib, model_class)(tiny.config).train()
    batch = _masked_batch(tiny.config)
    explanation = torch._dynamo.explain(model)(**batch)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()


def test_the_fixed_slots_give_the_same_loss_and_guesses_as_the_labels_alone(tiny):
    torch.manual_seed(0)
    model = bertlib.BertForMaskedLM(tiny.config).eval()
    batch = _masked_batch(tiny.config)
    with torch.no_grad():
        slotted = model(**batch)
        found = model(**{k: v for k, v in batch.items() if k != "masked_positions"})
    assert torch.allclose(slotted.loss, found.loss, atol=1e-6)
    scored = slotted.mlm_labels != -100
    assert torch.equal(slotted.mlm_labels[scored], found.mlm_labels)
    assert torch.allclose(slotted.mlm_logits[scored], found.mlm_logits, atol=1e-5)


def test_an_unknown_keyword_is_an_error_not_ignored(tiny):
    model = bertlib.BertForMaskedLM(tiny.config)
    ids = torch.randint(5, 500, (1, 6))
    with pytest.raises(TypeError, match="next_sentence_labels"):
        model(ids, next_sentence_labels=torch.tensor([0]))


def test_texts_in_labels_out_and_back_from_a_folder(tmp_path):
    train = rotten_tomatoes()["train"][:48]
    texts = [example.text for example in train]
    labels = ["fresh" if example.label else "rotten" for example in train]
    tokenizer = bertlib.BertTokenizer.from_pretrained(minilm_dir())
    recipe = bertlib.FineTuningRecipe(learning_rate=1e-4, epochs=1, batch_size=16)
    model = bertlib.fine_tune_classifier(minilm_dir(), tokenizer, texts, labels, recipe,
                                         max_length=48, dev=(texts[:16], labels[:16]),
                                         device=torch.device("cpu"))
    assert not model.training
    assert model.config.id2label == {0: "fresh", 1: "rotten"}
    predicted = bertlib.classify(model, tokenizer.with_max_length(48), texts[:8])
    assert set(predicted) <= {"fresh", "rotten"}
    model.save_pretrained(tmp_path)
    tokenizer.with_max_length(48).save_pretrained(tmp_path)
    again = bertlib.BertForSequenceClassification.from_pretrained(tmp_path)
    saved_tokenizer = bertlib.BertTokenizer.from_pretrained(tmp_path)
    assert saved_tokenizer.max_length == 48
    assert bertlib.classify(again, saved_tokenizer, texts[:8]) == predicted


@pytest.mark.parametrize("model_class", ["BertForSequenceClassification",
                                         "BertForTokenClassification"])
def test_the_fine_tuning_heads_in_training_compile_whole(tiny, model_class):
    """transformers' keywords (return_dict, hidden states, attentions) cost no graph break."""
    torch.manual_seed(0)
    model = getattr(bertlib, model_class)(tiny.config, num_labels=3).train()
    ids = torch.randint(5, tiny.config.vocab_size, (3, 16))
    labels = torch.tensor([0, 2, 1]) if model_class == "BertForSequenceClassification" \
        else torch.randint(0, 3, (3, 16))
    explanation = torch._dynamo.explain(model)(ids, attention_mask=torch.ones_like(ids),
                                               labels=labels, return_dict=True)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    torch._dynamo.reset()
