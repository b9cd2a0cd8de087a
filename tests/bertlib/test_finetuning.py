"""Task heads and their features (chapter 07): equal to transformers, checkpoints both ways,
clear errors, span decoding and mention scoring worked out by hand, a run that learns."""

import pytest
import torch
import transformers

from bertbook.datasets import CONLL_TAGS, LINK_TAGS, LinkedParagraph, link_questions, link_words
from bertlib.batch import PaddingCollator
from bertlib.core.config import BertConfig
from bertlib.core.encoder import BertModel
from bertlib.errors import CheckpointError, ConfigError, InputError
from bertlib.finetuning.examples import SpanQuestion, TaggedWords, TextExample, tag_names
from bertlib.finetuning.metrics import best_span
from bertlib.finetuning.models import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    classification_features,
    span_qa_features,
    tagging_features,
)
from bertlib.finetuning.run import (
    FineTuningRecipe,
    evaluate_classification,
    fine_tune,
    mention_f1,
    mentions,
)
from bertlib.pretraining.models import BertForMaskedLM, BertLMHeadModel
from bertlib.tokenizer import BertTokenizer

SMALL = dict(vocab_size=300, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=96, max_position_embeddings=32)
WORDS = ["paris", "is", "the", "capital", "of", "france", "united", "states", "american",
         "a", "city", "##s"]


def _tokenizer() -> BertTokenizer:
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ".", ","]
    return BertTokenizer({piece: i for i, piece in enumerate(pieces)}, max_length=32)


def _inputs() -> dict:
    ids = torch.randint(5, 300, (3, 12), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[2, 9:] = 0
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=(ids > 150).long() * mask)


@pytest.mark.parametrize("name, num_labels, labels", [
    ("BertForSequenceClassification", 3, dict(labels=torch.tensor([0, 2, 1]))),
    ("BertForTokenClassification", 3, dict(labels=torch.randint(0, 3, (3, 12)))),
    ("BertForQuestionAnswering", 2, dict(start_positions=torch.tensor([1, 2, 3]),
                                         end_positions=torch.tensor([4, 5, 6]))),
])
def test_heads_equal_transformers(tmp_path, name, num_labels, labels):
    torch.manual_seed(0)
    config = transformers.BertConfig(**SMALL, num_labels=num_labels, attn_implementation="eager")
    reference = getattr(transformers, name)(config).eval()
    reference.save_pretrained(tmp_path)
    ours = {"BertForSequenceClassification": BertForSequenceClassification,
            "BertForTokenClassification": BertForTokenClassification,
            "BertForQuestionAnswering": BertForQuestionAnswering}[name].from_pretrained(tmp_path)
    assert ours.new_weights == []
    with torch.no_grad():
        mine, theirs = ours(**_inputs(), **labels), reference(**_inputs(), **labels)
    their_logits = (theirs.logits if hasattr(theirs, "logits")
                    else torch.stack([theirs.start_logits, theirs.end_logits], -1))
    assert torch.allclose(mine.logits, their_logits, atol=1e-5)
    assert abs(float(mine.loss) - float(theirs.loss)) < 1e-5


def test_a_saved_classifier_reloads_with_its_labels(tmp_path):
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**SMALL), num_labels=5).eval()
    model.save_pretrained(tmp_path)
    again = BertForSequenceClassification.from_pretrained(tmp_path)  # num_labels read back
    assert again.num_labels == 5 and again.new_weights == []
    with torch.no_grad():
        assert torch.equal(model(**_inputs()).logits, again(**_inputs()).logits)
    with pytest.raises(CheckpointError, match="classifier.weight"):
        BertForSequenceClassification.from_pretrained(tmp_path, num_labels=2)


def test_an_mlm_checkpoint_gives_the_encoder_and_a_new_head_and_pooler(tmp_path):
    BertForMaskedLM(BertConfig(**SMALL)).save_pretrained(tmp_path)
    model = BertForSequenceClassification.from_pretrained(tmp_path)
    assert sorted(model.new_weights) == ["bert.pooler.dense.bias", "bert.pooler.dense.weight",
                                         "classifier.bias", "classifier.weight"]
    assert all(key.startswith("cls.") for key in model.unused_checkpoint_keys)


def test_bad_labels_are_explained_where_they_enter():
    """Label ranges are checked once, by fine_tune, not inside every forward (a host-device
    sync per step on a GPU)."""
    model = BertForSequenceClassification(BertConfig(**SMALL), num_labels=2)
    features = [{"input_ids": [2, 7, 3], "token_type_ids": [0, 0, 0], "labels": label}
                for label in (0, 1, 2)]
    with pytest.raises(InputError, match=r"labels must lie in 0\.\.1.*found \[2\].*num_labels"):
        fine_tune(model, features, FineTuningRecipe(), PaddingCollator(0), torch.device("cpu"))
    with pytest.raises(ConfigError, match="num_labels must be a positive integer"):
        BertForTokenClassification(BertConfig(**SMALL), num_labels=0)


def test_causal_encoding_ignores_what_comes_later():
    torch.manual_seed(0)
    model = BertModel(BertConfig(**SMALL)).eval()
    ids = torch.randint(5, 300, (1, 10))
    changed = ids.clone()
    changed[0, 6:] = 7
    with torch.no_grad():
        before = model(ids, causal=True).last_hidden_state
        after = model(changed, causal=True).last_hidden_state
        both_ways = model(changed).last_hidden_state
    assert torch.allclose(before[0, :6], after[0, :6], atol=1e-6)
    assert not torch.allclose(before[0, :6], both_ways[0, :6], atol=1e-3)


def test_left_to_right_loss_equals_transformers_causal_lm(tmp_path):
    torch.manual_seed(0)
    reference = transformers.BertLMHeadModel(transformers.BertConfig(
        **SMALL, is_decoder=True, attn_implementation="eager")).eval()
    reference.save_pretrained(tmp_path)
    ours = BertLMHeadModel.from_pretrained(tmp_path)
    ids = torch.randint(5, 300, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        mine = ours(ids, torch.ones_like(ids))
        theirs = reference(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
    assert abs(float(mine.loss) - float(theirs.loss)) < 1e-5


def test_left_to_right_reads_masked_batches_unmasked():
    """Masking the input must not change what the left-to-right model sees or scores."""
    torch.manual_seed(0)
    model = BertLMHeadModel(BertConfig(**SMALL)).eval()
    ids = torch.randint(5, 300, (1, 12))
    masked, labels = ids.clone(), torch.full_like(ids, -100)
    masked[0, [3, 7]], labels[0, [3, 7]] = 4, ids[0, [3, 7]]
    with torch.no_grad():
        plain, from_masked = model(ids), model(masked, labels=labels)
    assert torch.allclose(plain.loss, from_masked.loss)
    assert from_masked.mlm_logits.shape == (2, SMALL["vocab_size"])  # scored at the 2 masks
    assert torch.allclose(from_masked.mlm_logits, plain.mlm_logits[0, [2, 6]], atol=1e-6)


def test_best_span_respects_order_length_and_context():
    start = torch.tensor([0.0, 5.0, 1.0, 0.0, 9.0])
    end = torch.tensor([0.0, 0.0, 4.0, 8.0, 0.0])
    allowed = torch.tensor([False, True, True, True, True])
    assert best_span(start, end, allowed, max_answer_length=30) == (1, 3)  # 5 + 8
    assert best_span(start, end, allowed, max_answer_length=2) == (1, 2)  # 5 + 4 within 2
    assert best_span(start, end, torch.tensor([False, False, True, True, False])) == (2, 3)
    with pytest.raises(ValueError, match="no paragraph"):
        best_span(start, end, torch.zeros(5, dtype=torch.bool))


@pytest.mark.parametrize("tags, expected", [
    ([0, 1, 2, 0, 1], {(1, 2, 0), (4, 4, 0)}),
    ([1, 1, 2, 2], {(0, 0, 0), (1, 3, 0)}),
    ([0, 2, 2, 0], {(1, 2, 0)}),  # an I with no B opens a mention
    ([0, 0], set()),
    ([1, 2, 4, 3, 4, 0], {(0, 1, 0), (2, 2, 1), (3, 4, 1)}),  # I of another kind opens one
])
def test_mentions_from_tags(tags, expected):
    assert mentions(tags) == expected


def test_tag_names_number_b_odd_and_i_even():
    assert CONLL_TAGS == ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC",
                          "B-MISC", "I-MISC")
    assert LINK_TAGS == tag_names(["LINK"]) == ("O", "B-LINK", "I-LINK")


def test_link_words_tag_the_linked_words():
    paragraph = LinkedParagraph("t", "the city of new york .", ((12, 20, "New York City"),))
    assert link_words(paragraph) == TaggedWords(("the", "city", "of", "new", "york", "."),
                                                (0, 0, 0, 1, 2, 0))


def test_tagging_labels_sit_on_first_pieces():
    tokenizer = _tokenizer()
    text = "paris is a city of france ."
    words = link_words(LinkedParagraph("t", text, ((0, 5, "Paris"), (19, 25, "France"))))
    (feature,) = tagging_features(tokenizer, [words], max_length=32)
    tokens = [tokenizer.id_to_token[i] for i in feature["input_ids"]]
    assert tokens == ["[CLS]", "paris", "is", "a", "city", "of", "france", ".", "[SEP]"]
    assert feature["labels"] == [-100, 1, 0, 0, 0, 0, 1, 0, -100]
    windows = tagging_features(tokenizer, [words], max_length=5)  # 3 pieces a window
    assert [len(w["input_ids"]) for w in windows] == [5, 5, 3]


def test_span_answers_cover_the_linked_words():
    tokenizer = _tokenizer()
    text = "american cities , the capital of united states"
    paragraph = LinkedParagraph("t", text, ((0, 8, "United states"), (32, 46, "United states"),
                                            (22, 29, "Capital")))
    features = span_qa_features(tokenizer, link_questions(paragraph), max_length=32)
    assert [f["question"] for f in features] == ["United states", "Capital"]
    first = features[0]
    spans = [tokenizer.decode(first["input_ids"][s:e + 1]) for s, e in first["answers"]]
    assert spans == ["american", "united states"]
    assert (first["start_positions"], first["end_positions"]) == first["answers"][0]
    assert all(first["token_type_ids"][s] == 1 for s, _ in first["answers"])


def test_span_questions_beyond_the_window_are_left_out():
    tokenizer = _tokenizer()
    question = SpanQuestion("france", "paris is a city of france .", ((19, 25),))
    (kept,) = span_qa_features(tokenizer, [question], max_length=12)  # all 7 pieces fit
    assert tokenizer.decode(kept["input_ids"][kept["start_positions"]:
                                              kept["end_positions"] + 1]) == "france"
    assert span_qa_features(tokenizer, [question], max_length=8) == []  # 4 fit: france is cut


def test_collator_pads_inputs_and_labels():
    batch = PaddingCollator(pad_id=0)([
        {"input_ids": [2, 5, 3], "token_type_ids": [0, 0, 0], "labels": [-100, 1, -100]},
        {"input_ids": [2, 3], "token_type_ids": [0, 0], "labels": [-100, -100]}])
    assert batch["input_ids"].tolist() == [[2, 5, 3], [2, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [[-100, 1, -100], [-100, -100, -100]]
    with pytest.raises(ValueError, match="empty"):
        PaddingCollator(0)([])


def test_fine_tuning_learns_a_task_that_needs_the_text():
    """Label = whether 'france' is in the sentence: a tiny model must learn it."""
    tokenizer = _tokenizer()
    texts = [f"{a} is the capital of {b}" for a in ("paris", "a city", "states")
             for b in ("france", "united states", "american")]
    examples = [TextExample(t, int("france" in t)) for t in texts] * 12
    features = classification_features(tokenizer, examples, max_length=16)
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**{**SMALL, "vocab_size": 20}))
    fine_tune(model, features, FineTuningRecipe(learning_rate=1e-3, epochs=20, batch_size=16,
                                                precision="fp32"),
              PaddingCollator(tokenizer.pad_id), torch.device("cpu"))
    scores = evaluate_classification(model, features[:9], PaddingCollator(0), torch.device("cpu"))
    assert scores["accuracy"] == 1.0 and scores["f1"] == 1.0


def test_mention_f1_counts_every_row_together_not_a_mean_of_rows():
    found_all = ([1, 2, 0], [1, 2, 0])  # one mention, found
    found_none = ([0, 0, 0], [1, 3, 1])  # three mentions, none found
    predicted, gold = zip(found_all, found_none)
    # precision 1/1, recall 1/4: F1 0.4 (a mean of the rows' F1 would say 0.5)
    assert mention_f1(list(predicted), list(gold)) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        mention_f1([[1]], [[1], [1]])
