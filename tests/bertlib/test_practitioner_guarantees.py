"""What a practitioner trusts bertlib with: a run is never overwritten unasked, fine-tuning
resumes, labels keep their meaning through a save, bad input is named by its position, and
the transformers habits the README promises hold."""

import json
import signal
import warnings

import numpy as np
import pytest
import torch
import transformers
from peft import LoraConfig, get_peft_model

from bertbook.datasets import minilm_dir
from bertlib import (
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    BertTokenizer,
    FineTuningRecipe,
    MaskingRecipe,
    PretrainingRun,
    TrainingConfig,
    classify,
    fine_tune_classifier,
    pretrain,
)
from bertlib.errors import CheckpointError, ConfigError, InputError, TokenizerError
from bertlib.training.trainer import Trainer

CPU = torch.device("cpu")
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
TEXTS = ["good", "bad", "fine", "awful", "great", "poor", "nice", "dull"]
QUICK = FineTuningRecipe(learning_rate=1e-3, epochs=2, batch_size=2, precision="fp32")


@pytest.fixture(scope="module")
def tokenizer() -> BertTokenizer:
    return BertTokenizer.from_pretrained(minilm_dir(), max_length=16)


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    """A 2-layer encoder with MiniLM's vocabulary (no head): fine-tunes in a second."""
    folder = tmp_path_factory.mktemp("encoder")
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=30522, max_position_embeddings=32, **TINY)
              ).save_pretrained(folder)
    return folder


# --- runs are protected -------------------------------------------------------------------

def _tiny_run(steps: int = 4) -> PretrainingRun:
    return PretrainingRun(vocab_size=60, max_seq_length=16, objective="mlm",
                          masking=MaskingRecipe(probability=0.4, max_predictions=16),
                          training=TrainingConfig(steps=steps, batch_size=8, warmup_steps=1,
                                                  eval_every=2, checkpoint_every=2,
                                                  precision="fp32", progress=False))


SENTENCES = [f"the goal {i % 7} came late in the match against team {i % 5}"
             for i in range(120)]


def _folder_state(folder) -> dict:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_a_folder_holding_a_run_is_refused_and_left_exactly_as_it_was(tmp_path):
    pretrain(SENTENCES[:100], _tiny_run(), tmp_path, SENTENCES[100:], device=CPU)
    before = _folder_state(tmp_path)
    with pytest.raises(CheckpointError, match="already holds a run .*resume=True.*overwrite"):
        pretrain(SENTENCES[:100], _tiny_run(steps=6), tmp_path, SENTENCES[100:], device=CPU)
    assert _folder_state(tmp_path) == before


def test_overwrite_replaces_a_run_and_cannot_be_asked_with_resume(tmp_path):
    pretrain(SENTENCES[:100], _tiny_run(), tmp_path, SENTENCES[100:], device=CPU)
    with pytest.raises(ConfigError, match="ask for one of them"):
        pretrain(SENTENCES[:100], _tiny_run(), tmp_path, SENTENCES[100:], device=CPU,
                 resume=True, overwrite=True)
    result = pretrain(SENTENCES[:100], _tiny_run(steps=6), tmp_path, SENTENCES[100:],
                      device=CPU, overwrite=True)
    assert result.state.step == 6
    assert json.loads((tmp_path / "run.json").read_text())["run"]["training"]["steps"] == 6


def test_fine_tuning_stopped_by_ctrl_c_resumes_to_the_same_weights(
        encoder_folder, tokenizer, tmp_path, monkeypatch, capsys):
    labels = [i % 2 for i in range(len(TEXTS))]
    whole = fine_tune_classifier(encoder_folder, tokenizer, TEXTS, labels, QUICK,
                                 max_length=16, device="cpu")
    real_step, calls = Trainer._train_step, []

    def step_then_ctrl_c(self, batches):
        calls.append(1)
        if len(calls) == 3:
            signal.raise_signal(signal.SIGINT)
        return real_step(self, batches)

    monkeypatch.setattr(Trainer, "_train_step", step_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        fine_tune_classifier(encoder_folder, tokenizer, TEXTS, labels, QUICK, max_length=16,
                             device="cpu", output_dir=tmp_path)
    assert "with a checkpoint" in capsys.readouterr().err
    assert (tmp_path / "checkpoint.pt").is_file()
    resumed = fine_tune_classifier(encoder_folder, tokenizer, TEXTS, labels, QUICK,
                                   max_length=16, device="cpu", output_dir=tmp_path,
                                   resume=True)
    for name, tensor in whole.state_dict().items():
        assert torch.equal(tensor, resumed.state_dict()[name]), name
    assert BertForSequenceClassification.from_pretrained(tmp_path / "model").num_labels == 2


def test_ctrl_c_without_a_folder_says_that_nothing_is_saved(encoder_folder, tokenizer,
                                                             monkeypatch, capsys):
    real_step = Trainer._train_step

    def ctrl_c(self, batches):
        signal.raise_signal(signal.SIGINT)
        return real_step(self, batches)

    monkeypatch.setattr(Trainer, "_train_step", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        fine_tune_classifier(encoder_folder, tokenizer, TEXTS, [0, 1] * 4, QUICK,
                             max_length=16, device="cpu")
    err = capsys.readouterr().err
    assert "saving nothing" in err and "with a checkpoint" not in err


def test_a_saved_classifier_cuts_texts_where_its_positions_end(encoder_folder, tokenizer,
                                                               tmp_path):
    """The encoder has 32 positions; the default max_length (128) must not reach the
    tokenizer saved beside it, or a long text would crash the model instead of being cut."""
    fine_tune_classifier(encoder_folder, tokenizer, TEXTS, [0, 1] * 4, QUICK, device="cpu",
                         output_dir=tmp_path)
    saved = json.loads((tmp_path / "model" / "tokenizer_config.json").read_text())
    assert saved["model_max_length"] <= 32
    long_text = " ".join(["good"] * 200)
    read = transformers.pipeline("text-classification", model=str(tmp_path / "model"))
    assert read(long_text, truncation=True)[0]["label"] in ("0", "1")


# --- labels keep their meaning ------------------------------------------------------------

@pytest.mark.parametrize("labels", [[1, 0] * 4, [True, False] * 4, [2.5, 0.5] * 4,
                                    ["pos", "neg"] * 4])
def test_labels_come_back_as_given_after_a_save(encoder_folder, tokenizer, tmp_path, labels):
    model = fine_tune_classifier(encoder_folder, tokenizer, TEXTS, labels, QUICK,
                                 max_length=16, device="cpu")
    model.save_pretrained(tmp_path)
    again = BertForSequenceClassification.from_pretrained(tmp_path)
    guesses = classify(again, tokenizer, ["great", "poor"])
    assert all(type(guess) is type(labels[0]) and guess in labels for guess in guesses)
    theirs = transformers.AutoModelForSequenceClassification.from_pretrained(str(tmp_path))
    assert theirs.config.id2label == {i: str(v) for i, v in enumerate(sorted(set(labels),
                                                                             key=str))}


def test_a_missing_label_is_refused_by_its_position(encoder_folder, tokenizer):
    with pytest.raises(InputError, match="label 2 is None"):
        fine_tune_classifier(encoder_folder, tokenizer, TEXTS[:4], [1, 0, None, 1], QUICK)


def test_tensor_and_array_labels_are_read_as_numbers(encoder_folder, tokenizer):
    for labels in (torch.tensor([1, 0] * 4), np.array([1, 0] * 4)):
        model = fine_tune_classifier(encoder_folder, tokenizer, TEXTS, labels, QUICK,
                                     max_length=16, device="cpu")
        assert model.config.label_values == [0, 1]


def test_the_same_number_of_labels_keeps_their_names(encoder_folder, tokenizer, tmp_path):
    model = fine_tune_classifier(encoder_folder, tokenizer, TEXTS, ["pos", "neg"] * 4, QUICK,
                                 max_length=16, device="cpu")
    model.save_pretrained(tmp_path)
    kept = BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)
    assert kept.config.id2label == {0: "neg", 1: "pos"}
    assert kept.config.label_values == ["neg", "pos"]
    renamed = kept.config.with_overrides(num_labels=3)  # another count: generic names
    assert renamed.id2label[2] == "LABEL_2" and renamed.label_values is None


def test_a_head_the_folder_lacks_is_named_in_a_warning(encoder_folder):
    with pytest.warns(UserWarning, match=r"holds no classifier\.weight, classifier\.bias.*"
                                         r"train the model"):
        BertForSequenceClassification.from_pretrained(encoder_folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the encoder alone loads without a word
        BertModel.from_pretrained(encoder_folder)


# --- inputs named by position ---------------------------------------------------------

@pytest.mark.parametrize("bad, message", [("", "text 2 is empty"), (None, "text 2 is None"),
                                          (7, "text 2 is 7"), (b"bytes", "text 2 is bytes")])
def test_a_bad_text_is_named_by_its_position(encoder_folder, tokenizer, bad, message):
    texts = ["good", "bad", bad, "fine"]
    with pytest.raises(InputError, match=message):
        fine_tune_classifier(encoder_folder, tokenizer, texts, [1, 0, 1, 0], QUICK)
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, **TINY))
    with pytest.raises(InputError, match=message):
        classify(model, tokenizer, texts)


def test_the_tokenizer_names_the_bad_text_in_a_list(tokenizer):
    with pytest.raises(TokenizerError, match="text 1: the text is empty"):
        tokenizer(["a good film", " ", "a dull one"])


def test_pretraining_names_a_document_that_is_not_text(tmp_path):
    with pytest.raises(InputError, match="document 1 is NoneType"):
        pretrain(["a text", None], _tiny_run(), tmp_path, ["held out"], device=CPU)
    with pytest.raises(InputError, match="document 0, paragraph 1 is bytes"):
        pretrain([["a text", b"bytes"]], _tiny_run(), tmp_path, ["held out"], device=CPU)
    assert not any(tmp_path.iterdir())  # refused before anything was written


# --- transformers' habits --------------------------------------------------------------

def test_a_model_answers_what_transformers_clients_ask(tmp_path):
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, **TINY))
    assert model.device == CPU and model.dtype == torch.float32
    assert model.num_parameters() == sum(p.numel() for p in model.parameters())
    config = model.config
    assert config.model_type == "bert" and config.label2id == {"LABEL_0": 0, "LABEL_1": 1}
    assert config.to_dict()["model_type"] == "bert" and "num_labels" not in config.to_dict()
    model.save_pretrained(tmp_path, safe_serialization=True)
    with pytest.raises(ConfigError, match="safetensors only"):
        model.save_pretrained(tmp_path, safe_serialization=False)
    half = BertForSequenceClassification.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert half.dtype == torch.bfloat16
    assert BertForSequenceClassification.from_pretrained(tmp_path, dtype="float16").dtype \
        == torch.float16
    with pytest.raises(ConfigError, match="not a torch dtype"):
        BertForSequenceClassification.from_pretrained(tmp_path, dtype="float17")


def test_the_readmes_peft_line_runs_as_written():
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, **TINY))
    peft_model = get_peft_model(model, LoraConfig(task_type="SEQ_CLS", r=4))
    peft_model(input_ids=torch.tensor([[101, 2204, 102]]))


def test_a_pipeline_takes_the_model_object():
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(minilm_dir()))
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, **TINY))
    read = transformers.pipeline("text-classification", model=model, tokenizer=tokenizer)
    assert read("a good film")[0]["label"] in ("LABEL_0", "LABEL_1")


def test_a_device_is_taken_by_name_and_a_wrong_one_is_explained(encoder_folder, tokenizer):
    model = BertForSequenceClassification(BertConfig(vocab_size=30522, **TINY))
    assert len(classify(model, tokenizer, ["good"], device="cpu")) == 1
    with pytest.raises(ConfigError, match="not a device torch knows"):
        classify(model, tokenizer, ["good"], device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="asks for CUDA, which this machine lacks"):
            classify(model, tokenizer, ["good"], device="cuda")
