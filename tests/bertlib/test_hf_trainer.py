"""transformers' Trainer on bertlib models: it trains and evaluates them as they are, and
bertlib.integrations.TransformersTrainer saves folders that bertlib and transformers both
load (tied weights once) and resumes from its checkpoints to the same weights."""

import pytest
import safetensors.torch
import torch
import transformers
from transformers import AutoTokenizer, DataCollatorWithPadding, TrainingArguments
from transformers.utils import logging as transformers_logging

import bertlib
from bertbook.datasets import minilm_dir
from bertlib.integrations import TransformersTrainer

transformers_logging.set_verbosity_error()
transformers_logging.disable_progress_bar()

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=40, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
WORDS = ["the film was", "a story that felt", "this book is", "an ending so"]
PRAISE, SCORN = ["wonderful", "moving", "brilliant"], ["dull", "clumsy", "tedious"]


def _reviews(tokenizer) -> list[dict]:
    """Texts whose label is whether their last word praises: learnable in a few steps."""
    rows = []
    for i, opening in enumerate(WORDS * 3):
        label = i % 2
        word = (PRAISE if label else SCORN)[i % 3]
        rows.append({**tokenizer(f"{opening} {word}"), "labels": label})
    return rows


def _arguments(folder, **changes) -> TrainingArguments:
    settings = dict(output_dir=str(folder), per_device_train_batch_size=4, num_train_epochs=20,
                    learning_rate=5e-3, report_to=[], use_cpu=True, disable_tqdm=True,
                    save_strategy="no", seed=0)
    return TrainingArguments(**{**settings, **changes})


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(minilm_dir())


def _classifier(tokenizer) -> bertlib.BertForSequenceClassification:
    torch.manual_seed(0)
    config = bertlib.BertConfig(vocab_size=tokenizer.vocab_size, **TINY)
    return bertlib.BertForSequenceClassification(config, num_labels=2)


@pytest.mark.slow  # a few seconds of training each
def test_the_trainer_trains_evaluates_and_saves_a_classifier(tokenizer, tmp_path):
    rows = _reviews(tokenizer)
    model = _classifier(tokenizer)
    trainer = TransformersTrainer(model=model, args=_arguments(tmp_path), train_dataset=rows,
                                  eval_dataset=rows, processing_class=tokenizer,
                                  data_collator=DataCollatorWithPadding(tokenizer))
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    after = trainer.evaluate()["eval_loss"]
    assert after < 0.5 * before, (before, after)
    trainer.save_model(tmp_path / "final")
    batch = DataCollatorWithPadding(tokenizer)([{k: v for k, v in row.items() if k != "labels"}
                                               for row in rows])
    ours = bertlib.BertForSequenceClassification.from_pretrained(tmp_path / "final")
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "final")
    with torch.no_grad():
        expected = model.eval()(**batch).logits
        torch.testing.assert_close(ours(**batch).logits, expected)
        torch.testing.assert_close(theirs.eval()(**batch).logits, expected)
    assert AutoTokenizer.from_pretrained(tmp_path / "final").vocab == tokenizer.vocab


def _masked_rows(count: int) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    rows = []
    for _ in range(count):
        ids = torch.randint(5, 300, (12,), generator=generator)
        labels = torch.full_like(ids, -100)
        labels[::4] = ids[::4]
        rows.append({"input_ids": ids, "labels": labels})
    return rows


def _masked_lm() -> bertlib.BertForMaskedLM:
    torch.manual_seed(0)
    return bertlib.BertForMaskedLM(bertlib.BertConfig(vocab_size=300, **TINY))


@pytest.mark.slow
def test_a_masked_lm_saves_its_tied_weights_once(tmp_path):
    model = _masked_lm()
    trainer = TransformersTrainer(model=model, args=_arguments(tmp_path, num_train_epochs=1),
                                  train_dataset=_masked_rows(16))
    trainer.train()
    trainer.save_model(tmp_path / "final")
    stored = safetensors.torch.load_file(tmp_path / "final" / "model.safetensors")
    assert "bert.embeddings.word_embeddings.weight" in stored
    assert "cls.predictions.decoder.weight" not in stored
    ids = _masked_rows(2)[0]["input_ids"][None]
    theirs = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "final").eval()
    with torch.no_grad():
        torch.testing.assert_close(theirs(input_ids=ids).logits, model.eval()(ids).mlm_logits)


@pytest.mark.slow
def test_resuming_from_a_checkpoint_ends_on_the_same_weights(tmp_path):
    rows = _masked_rows(32)
    straight = _masked_lm()
    arguments = _arguments(tmp_path, num_train_epochs=2, save_strategy="steps", save_steps=8)
    TransformersTrainer(model=straight, args=arguments, train_dataset=rows).train()
    assert (tmp_path / "checkpoint-8" / "config.json").is_file()
    resumed = _masked_lm()
    TransformersTrainer(model=resumed, args=arguments, train_dataset=rows).train(
        resume_from_checkpoint=str(tmp_path / "checkpoint-8"))
    for (name, mine), theirs in zip(resumed.state_dict().items(),
                                    straight.state_dict().values(), strict=True):
        assert torch.equal(mine, theirs), name
