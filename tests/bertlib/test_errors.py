"""Every bad input and fault a user has met, in one place: each gets a clear message that
says what to do, and nothing is lost or silently corrupted.

Silent loss or corruption
  test_a_checkpoint_with_more_layers_than_its_config_is_refused
  test_non_finite_weights_are_refused_naming_the_file
  test_a_broken_cache_file_is_named_and_rebuilt            (truncated, empty, [], wrong shape)
  test_resuming_with_other_settings_is_refused             (--resume --corpus lee-news)
  test_an_unwritable_out_folder_is_refused_before_training
  test_a_full_disk_says_so_and_leaves_no_temporary_file
  test_a_write_killed_mid_way_keeps_the_last_checkpoint    (kill -9; orphans cleared on start)
  test_a_pair_that_cannot_fit_is_refused                   (max_length=3)
  test_saves_into_one_folder_take_turns_and_dead_staging_is_cleared
Raw errors, now with advice
  test_an_empty_batch_is_explained                         ((0, 5) and (2, 0))
  test_integer_types_name_the_accepted_ones                (int16, uint8; float ids too)
  test_from_pretrained_on_a_file_or_a_missing_folder
  test_a_config_that_is_not_json_names_its_file
  test_a_damaged_safetensors_file_is_named
  test_a_damaged_pickle_never_suggests_unsafe_loading
  test_the_tokenizer_refuses_none_surrogates_and_bad_vocab_files
  test_resume_without_a_checkpoint_is_one_line_before_any_work
  test_a_save_onto_a_file_or_an_unwritable_place_says_so
  test_position_ids_past_the_table_are_named
  test_a_damaged_tokenizer_config_is_named
  test_a_learning_rate_that_cannot_train_is_refused        (NaN, negative, 0)
  test_a_truncated_checkpoint_is_named_not_unpickled_deep_in_torch
  test_a_damaged_run_record_is_named                       (empty, cut, not an object)
Wrong behaviour, fixed
  test_decode_skips_special_tokens
  test_divergence_advice_fits_the_run
  test_a_config_that_would_compute_nonsense_is_refused     (layer_norm_eps, dropout, id2label)
  test_decode_refuses_ids_outside_the_vocabulary           (was: dropped or a raw error)
  test_a_recipe_that_cannot_train_is_refused               (batch_size 0, NaN or negative rate)
  test_labels_that_cannot_name_classes_are_refused         (lengths, one class, 1 and "1",
                                                            True and 1, unhashable, unseen dev)
  test_one_string_is_one_text_and_a_generator_is_read_once
Already clear, kept that way
  test_the_clear_messages_stay                             (long input, ids outside the vocab,
                                                            mask shapes, checkpoint shapes,
                                                            empty and over-long text, sizes)
  test_a_nan_loss_stops_training                           (tests/bertlib/test_trainer.py has more)
  test_out_on_an_existing_run_is_refused                   (tests/bertbook/test_pretrain_cli.py)
  test_a_missing_data_package_names_its_install_command
"""

import os
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file

from bertbook.datasets import minilm_dir
from bertbook.package_data import cached_rows, package_file
from bertbook.pretrain import main as pretrain_main
from bertbook.sizes import BookSizeError, pick_size
from bertlib import (
    BertConfig,
    BertForPreTraining,
    BertModel,
    BertTokenizer,
    CheckpointError,
    ConfigError,
    DataUnavailable,
    FineTuningRecipe,
    InputError,
    PretrainingCollator,
    TokenizerError,
    Trainer,
    TrainingConfig,
    TrainingDiverged,
    classify,
    fine_tune_classifier,
)
from bertlib.batch import PaddingCollator
from bertlib.finetuning.examples import TextExample
from bertlib.finetuning.models import BertForSequenceClassification, classification_features
from bertlib.finetuning.run import fine_tune
from bertlib.pretraining.sentence_pairs import SentencePair

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=16)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer.from_pretrained(minilm_dir())


@pytest.fixture()
def saved(tmp_path):
    """A small BertModel saved as a checkpoint folder."""
    torch.manual_seed(0)
    BertModel(BertConfig(**{**TINY, "num_hidden_layers": 3})).save_pretrained(tmp_path)
    return tmp_path


# --- silent loss or corruption ---------------------------------------------------------

def test_a_checkpoint_with_more_layers_than_its_config_is_refused(saved):
    with pytest.raises(CheckpointError, match=r"not in this model: encoder\.layer\.2\."):
        BertModel.from_pretrained(saved, num_hidden_layers=2)


def test_non_finite_weights_are_refused_naming_the_file(saved):
    state = load_file(saved / "model.safetensors")
    state["encoder.layer.0.output.dense.weight"][0, 0] = float("nan")
    save_file(state, saved / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"model\.safetensors holds NaN or infinite"):
        BertModel.from_pretrained(saved)


ROWS = [{"title": "A", "paragraphs": ["one", "two"]}]


@pytest.mark.parametrize("content", ['[{"title": "A", "parag', "", "[]", '[{"name": 1}]',
                                     '{"title": "A"}'])
def test_a_broken_cache_file_is_named_and_rebuilt(tmp_path, content):
    path = tmp_path / "cache.json"
    path.write_text(content)
    with pytest.warns(UserWarning, match=f"cache file {path}.*rebuilding"):
        assert cached_rows(path, lambda: ROWS, {"title", "paragraphs"}) == ROWS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rebuilt file is read back without a word
        assert cached_rows(path, lambda: [], {"title", "paragraphs"}) == ROWS


def _started_run(folder):
    """A run folder as the smoke size's command leaves it: two steps on the news corpus."""
    assert pretrain_main(["--size", "smoke", "--out", str(folder), "--steps", "2",
                          "--corpus", "lee-news"]) == 0


def test_resuming_with_other_settings_is_refused(tmp_path, capsys):
    _started_run(tmp_path)  # on the news corpus; resumed on the smoke size's own corpus
    code = pretrain_main(["--size", "smoke", "--out", str(tmp_path), "--resume",
                          "--steps", "2", "--mask-probability", "0.25"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "run.masking.probability: 0.4 then, 0.25 now" in err and "text: '" in err


def test_an_unwritable_out_folder_is_refused_before_training(tmp_path, capsys):
    """A folder below a file can be made by nobody, root included (who ignores chmod)."""
    (tmp_path / "a-file").write_text("")
    code = pretrain_main(["--size", "smoke", "--out", str(tmp_path / "a-file" / "run")])
    assert code == 2 and "cannot write in" in capsys.readouterr().err


def _pairs(n=16):
    return [SentencePair([5 + i % 50, 6], [7, 8 + i % 40], i % 2 == 0) for i in range(n)]


def _trainer(out, precision="fp32", learning_rate=1e-3):
    torch.manual_seed(0)
    config = BertConfig.preset("bert-tiny", vocab_size=30522, max_position_embeddings=16)
    return Trainer(BertForPreTraining(config), _pairs(),
                   PretrainingCollator(BertTokenizer.from_pretrained(minilm_dir())),
                   TrainingConfig(steps=4, batch_size=4, learning_rate=learning_rate,
                                  precision=precision, progress=False), output_dir=out)


def test_a_full_disk_says_so_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path)
    first = trainer.save_checkpoint().read_bytes()

    def disk_full(payload, path):
        path.write_bytes(b"half a checkpoint")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter "
                           "failed writing file data/3: file write failed")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(CheckpointError, match=r"MiB are free there: if no space is left"):
        trainer.save_checkpoint()
    assert list(tmp_path.glob("*.tmp")) == []
    assert (tmp_path / "checkpoint.pt").read_bytes() == first  # the previous one, intact


def test_a_write_killed_mid_way_keeps_the_last_checkpoint(tmp_path, tokenizer):
    trainer = _trainer(tmp_path)
    trainer.save_checkpoint()
    script = textwrap.dedent(f"""
        import os, signal, sys, torch
        sys.path.insert(0, {os.getcwd()!r})
        from tests.bertlib.test_errors import _trainer
        from pathlib import Path
        trainer = _trainer(Path({str(tmp_path)!r}))
        def killed(payload, path):
            path.write_bytes(b"the first half")
            os.kill(os.getpid(), signal.SIGKILL)
        torch.save = killed
        trainer.save_checkpoint()
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert done.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob("checkpoint.*.tmp"))) == 1  # the orphan of the kill
    resumed = _trainer(tmp_path)  # the next start clears it...
    assert list(tmp_path.glob("checkpoint.*.tmp")) == []
    resumed.load_checkpoint()  # ...and the last checkpoint still loads


def test_a_pair_that_cannot_fit_is_refused(tokenizer):
    short = tokenizer.with_max_length(3)
    with pytest.raises(TokenizerError, match="cannot hold a pair"):
        short.encode("the bank", "the river")


# --- raw errors, now with advice -------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_model():
    return BertModel(BertConfig(**TINY)).eval()


@pytest.mark.parametrize("shape", [(0, 5), (2, 0)])
def test_an_empty_batch_is_explained(tiny_model, shape):
    with pytest.raises(InputError, match=rf"the batch is empty \(shape \({shape[0]}, {shape[1]}\)"):
        tiny_model(torch.zeros(shape, dtype=torch.long))


@pytest.mark.parametrize("dtype", [torch.int16, torch.uint8, torch.float32])
def test_integer_types_name_the_accepted_ones(tiny_model, dtype):
    with pytest.raises(InputError, match=r"must be torch\.int64 \(long\) or torch\.int32"):
        tiny_model(torch.ones(1, 3, dtype=dtype))


def test_from_pretrained_on_a_file_or_a_missing_folder(saved):
    with pytest.raises(CheckpointError, match="is a file; give the folder"):
        BertModel.from_pretrained(saved / "model.safetensors")
    with pytest.raises(CheckpointError, match="there is no folder"):
        BertModel.from_pretrained(saved / "missing")


def test_a_config_that_is_not_json_names_its_file(saved):
    (saved / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json is not a JSON config"):
        BertModel.from_pretrained(saved)


def test_a_damaged_safetensors_file_is_named(saved):
    weights = saved / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=r"model\.safetensors cannot be read .*download"):
        BertModel.from_pretrained(saved)


def test_a_damaged_pickle_never_suggests_unsafe_loading(saved):
    (saved / "model.safetensors").unlink()
    (saved / "pytorch_model.bin").write_bytes(b"not a pickle" * 50)
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin cannot be read") as error:
        BertModel.from_pretrained(saved)
    assert "weights_only" not in str(error.value)


def test_the_tokenizer_refuses_none_surrogates_and_bad_vocab_files(tokenizer, tmp_path):
    with pytest.raises(TokenizerError, match="must be a string, not NoneType"):
        tokenizer.encode(None)
    with pytest.raises(TokenizerError, match="texts must be a string or a list"):
        tokenizer(None)
    with pytest.raises(TokenizerError, match="lone surrogate"):
        tokenizer.encode("caf\udce9")
    (tmp_path / "vocab.txt").write_bytes("[PAD]\n[UNK]\ncafé\n".encode("latin-1"))
    with pytest.raises(TokenizerError, match=r"vocab\.txt is not UTF-8"):
        BertTokenizer.from_pretrained(tmp_path)


@pytest.mark.slow  # a subprocess that loads the corpus
def test_resume_without_a_checkpoint_is_one_line_before_any_work(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bertbook.pretrain", "--size", "smoke",
                           "--out", str(tmp_path / "run"), "--resume"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no checkpoint.pt to resume from" in done.stderr


# --- wrong behaviour, fixed --------------------------------------------------------------

@pytest.mark.parametrize("change, field", [
    (dict(layer_norm_eps=-1), "layer_norm_eps"), (dict(layer_norm_eps=0), "layer_norm_eps"),
    (dict(hidden_dropout_prob=1.5), "hidden_dropout_prob"),
    (dict(attention_probs_dropout_prob=float("nan")), "attention_probs_dropout_prob"),
    (dict(id2label={0: "spam", 1: "spam"}), "id2label names two labels alike"),
])
def test_a_config_that_would_compute_nonsense_is_refused(change, field):
    with pytest.raises(ConfigError, match=field):
        BertConfig(**{**TINY, **change})


@pytest.mark.parametrize("ids", [[101, -1, 102], [101, 30522]])
def test_decode_refuses_ids_outside_the_vocabulary(tokenizer, ids):
    with pytest.raises(TokenizerError, match=r"not in this vocabulary \(0\.\.30521\)"):
        tokenizer.decode(ids)


@pytest.mark.parametrize("change, field", [
    (dict(batch_size=0), "batch_size"), (dict(learning_rate=float("nan")), "learning_rate"),
    (dict(learning_rate=-1e-4), "learning_rate"), (dict(epochs=0), "epochs"),
    (dict(warmup_share=1.0), "warmup_share"),
])
def test_a_recipe_that_cannot_train_is_refused(change, field):
    with pytest.raises(ConfigError, match=field):
        FineTuningRecipe(**change)


@pytest.fixture(scope="module")
def small_checkpoint(tmp_path_factory):
    """A 2-layer BERT with MiniLM's vocabulary: fine-tunes in a second."""
    folder = tmp_path_factory.mktemp("small")
    torch.manual_seed(0)
    BertModel(BertConfig(**{**TINY, "vocab_size": 30522, "max_position_embeddings": 32})
              ).save_pretrained(folder)
    return folder


QUICK = FineTuningRecipe(learning_rate=1e-3, epochs=1, batch_size=2, precision="fp32")


@pytest.mark.parametrize("texts, labels, dev, message", [
    (["good", "bad", "fine"], ["pos", "neg"], None, "differ in number \\(3 and 2\\)"),
    (["good", "bad"], ["pos", "pos"], None, "at least two labels"),
    (["good", "bad"], [1, "1"], None, "'1' \\(str\\), 1 \\(int\\) would become one class"),
    (["good", "bad", "ok"], [True, 1, 0], None, "would become one class"),
    (["good", "bad"], [["pos"], ["neg"]], None, "must be strings, numbers or booleans"),
    (["good", "bad"], ["pos", "neg"], (["fine"], ["meh"]), "dev labels \\['meh'\\] never occur"),
    (["good", "bad"], ["pos", "neg"], (["fine", "ok"], ["pos"]), "dev texts and dev labels"),
])
def test_labels_that_cannot_name_classes_are_refused(small_checkpoint, tokenizer, texts, labels,
                                                     dev, message):
    with pytest.raises(InputError, match=message):
        fine_tune_classifier(small_checkpoint, tokenizer, texts, labels, QUICK, max_length=16,
                             dev=dev, device=torch.device("cpu"))


def test_one_string_is_one_text_and_a_generator_is_read_once(small_checkpoint, tokenizer):
    labels = (label for label in ["pos", "neg", "pos", "neg"])
    model = fine_tune_classifier(small_checkpoint, tokenizer, ["good", "bad", "fine", "awful"],
                                 labels, QUICK, max_length=16, device=torch.device("cpu"))
    assert model.config.id2label == {0: "neg", 1: "pos"}
    (guess,) = classify(model, tokenizer.with_max_length(16), "great")
    assert guess in {"neg", "pos"}

def test_decode_skips_special_tokens(tokenizer):
    ids = tokenizer.encode("The bank", "the river").ids
    assert tokenizer.decode(ids) == "the bank the river"
    assert tokenizer.decode(ids, skip_special=False).startswith("[CLS] the bank [SEP]")


def test_divergence_advice_fits_the_run(tmp_path):
    trainer = _trainer(tmp_path / "never-saved", learning_rate=1e4)
    trainer.config.max_loss = 0.0  # any loss counts as diverged
    with pytest.raises(TrainingDiverged) as error:
        trainer.train()
    message = str(error.value)
    assert "No checkpoint was written" in message and "None" not in message
    assert "fp32 instead" not in message  # the run already is in fp32
    assert "lower the learning rate (now 10000.0)" in message


# --- already clear, kept that way --------------------------------------------------------

def test_the_clear_messages_stay(tiny_model, tokenizer, saved, monkeypatch):
    with pytest.raises(InputError, match="20 tokens long; this model has 16 positions"):
        tiny_model(torch.zeros(1, 20, dtype=torch.long))
    with pytest.raises(InputError, match=r"token ids must lie in 0\.\.119"):
        tiny_model(torch.tensor([[1, 500]]))
    with pytest.raises(InputError, match="attention_mask has shape"):
        tiny_model(torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 4))
    with pytest.raises(CheckpointError, match="wrong shape"):
        BertModel.from_pretrained(saved, hidden_size=64, num_attention_heads=4)
    with pytest.raises(TokenizerError, match="is empty"):
        tokenizer.encode("   ")
    with pytest.raises(TokenizerError, match="more than max_length"):
        tokenizer.with_max_length(8).encode("a much longer sentence than eight pieces allow",
                                            truncation=False)
    monkeypatch.setenv("BERT_BOOK_SIZE", "laptop")
    with pytest.raises(BookSizeError, match="'laptop' is not a size of this book"):
        pick_size({"smoke": {}, "cpu": {}, "gpu": {}})


def test_a_nan_loss_stops_training(tmp_path):
    trainer = _trainer(tmp_path)
    with torch.no_grad():
        trainer.model.bert.embeddings.LayerNorm.weight[0] = float("nan")
    with pytest.raises(TrainingDiverged, match="the loss is nan at step 1"):
        trainer.train()


def test_out_on_an_existing_run_is_refused(tmp_path, capsys):
    _started_run(tmp_path)
    with pytest.raises(SystemExit):
        pretrain_main(["--size", "smoke", "--out", str(tmp_path)])
    assert "already holds a run; pass --resume" in capsys.readouterr().err


def test_a_missing_data_package_names_its_install_command():
    with pytest.raises(DataUnavailable, match="pip install no-such-package==1.0"):
        package_file("no_such_package", "data.txt", "pip install no-such-package==1.0")


def test_a_save_onto_a_file_or_an_unwritable_place_says_so(tmp_path):
    model = BertModel(BertConfig(**TINY))
    (tmp_path / "taken").write_text("not a folder")
    with pytest.raises(CheckpointError, match="is a file; a save writes a folder there"):
        model.save_pretrained(tmp_path / "taken")
    with pytest.raises(CheckpointError, match="cannot make the folder"):
        model.save_pretrained(tmp_path / "taken" / "inside")


def test_saves_into_one_folder_take_turns_and_dead_staging_is_cleared(tmp_path):
    """A save waits while another holds the folder's lock, so two saves never leave one's
    config beside the other's weights. A staging folder whose process is gone (a save
    killed mid-way) is removed by the next save."""
    import fcntl

    BertModel(BertConfig(**TINY)).save_pretrained(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (tmp_path / f".saving-{dead}-0000").mkdir()
    (tmp_path / "model.safetensors").unlink()
    saver = textwrap.dedent(f"""
        from bertlib import BertConfig, BertModel
        BertModel(BertConfig(**{TINY!r})).save_pretrained({str(tmp_path)!r})
    """)
    with open(tmp_path / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another save in progress
        other = subprocess.Popen([sys.executable, "-c", saver])
        with pytest.raises(subprocess.TimeoutExpired):
            other.wait(timeout=8)  # it waits for the lock
        assert not (tmp_path / "model.safetensors").exists()
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert other.wait(timeout=120) == 0
    assert {p.name for p in tmp_path.iterdir()} == {".lock", "config.json", "model.safetensors"}
    BertModel.from_pretrained(tmp_path)


def test_position_ids_past_the_table_are_named():
    model = BertModel(BertConfig(**TINY)).eval()
    ids = torch.randint(5, 100, (1, 4))
    with pytest.raises(InputError, match=r"position_ids must lie in 0\.\.15"):
        model(ids, position_ids=torch.tensor([[0, 1, 2, 16]]))


def test_a_damaged_tokenizer_config_is_named(tmp_path, tokenizer):
    tokenizer.save_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text('{"do_lower_case": tr')
    with pytest.raises(TokenizerError, match="tokenizer_config.json is not JSON"):
        BertTokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("rate", [float("nan"), -1e-4, 0.0])
def test_a_learning_rate_that_cannot_train_is_refused(rate):
    with pytest.raises(ConfigError, match="learning_rate must be a positive number"):
        TrainingConfig(steps=10, learning_rate=rate)


def test_a_truncated_checkpoint_is_named_not_unpickled_deep_in_torch(tmp_path):
    trainer = _trainer(tmp_path)
    trainer.save_checkpoint()
    data = (tmp_path / "checkpoint.pt").read_bytes()
    (tmp_path / "checkpoint.pt").write_bytes(data[:len(data) // 2])
    with pytest.raises(CheckpointError, match="checkpoint.pt cannot be read .*truncated"):
        trainer.load_checkpoint()


@pytest.mark.parametrize("content", ["", "{", "[1, 2"])
def test_a_damaged_run_record_is_named(tmp_path, capsys, content):
    _started_run(tmp_path)
    (tmp_path / "run.json").write_text(content)
    code = pretrain_main(["--size", "smoke", "--out", str(tmp_path), "--resume", "--steps", "2",
                          "--corpus", "lee-news"])
    assert code == 2 and "run.json cannot be read" in capsys.readouterr().err


@pytest.mark.parametrize("labels", [[1, 0, 1, 0], ["pos", "neg", "pos", "neg"],
                                    [2.5, 0.5, 2.5, 0.5]])
def test_labels_come_back_with_their_type(small_checkpoint, tokenizer, labels):
    model = fine_tune_classifier(small_checkpoint, tokenizer, ["good", "bad", "fine", "awful"],
                                 labels, QUICK, max_length=16, device=torch.device("cpu"))
    guesses = classify(model, tokenizer.with_max_length(16), ["great", "poor"])
    assert all(type(guess) is type(labels[0]) and guess in labels for guess in guesses)


def test_ctrl_c_in_fine_tuning_saves_and_resumes_to_the_same_weights(small_checkpoint,
                                                                     tokenizer, tmp_path,
                                                                     capsys):
    texts = ["good", "bad", "fine", "awful", "great", "poor", "nice", "dull"]
    features = classification_features(tokenizer.with_max_length(16),
                                       [TextExample(t, i % 2) for i, t in enumerate(texts)])
    recipe = FineTuningRecipe(learning_rate=1e-3, epochs=3, batch_size=2, precision="fp32")
    collator, cpu = PaddingCollator(tokenizer.pad_id), torch.device("cpu")

    def fresh():
        torch.manual_seed(0)
        return BertForSequenceClassification.from_pretrained(small_checkpoint, num_labels=2)

    def ctrl_c_after_first_epoch(model):
        if not os.environ.get("SENT"):
            os.environ["SENT"] = "1"
            os.kill(os.getpid(), signal.SIGINT)
        return {}

    def nothing(model):  # the same evaluation schedule in every run, as resume expects
        return {}

    unbroken = fresh()
    fine_tune(unbroken, features, recipe, collator, cpu, nothing)
    stopped = fresh()
    try:
        with pytest.raises(KeyboardInterrupt, match="stopped at step 4"):
            fine_tune(stopped, features, recipe, collator, cpu, ctrl_c_after_first_epoch,
                      output_dir=tmp_path / "run")
    finally:
        os.environ.pop("SENT", None)
    assert "SIGINT at step 4: saved" in capsys.readouterr().err
    resumed = fresh()
    fine_tune(resumed, features, recipe, collator, cpu, nothing, output_dir=tmp_path / "run",
              resume=True)
    expected = unbroken.state_dict()
    assert all(torch.equal(t, expected[name]) for name, t in resumed.state_dict().items())
