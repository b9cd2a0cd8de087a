"""The work that chapters 01, 07, 08, 09 and 10 do at their `gpu` size, for `budget_report`.

Each function turns a chapter's size settings into the list of training runs it will do,
so the chapter can print its cost on a T4 and an A100 before anything runs. The arithmetic
is the book's bookkeeping, not BERT's, so it lives here rather than in the chapters' cells.
"""

from bertbook.budget import (
    WIKITEXT_TOKENS_PER_ARTICLE,
    Work,
    fine_tuning_work,
    inference_work,
    pretraining_work,
    training_work,
)
from bertbook.comparison import models_trained
from bertbook.datasets import minilm_dir
from bertlib.core.config import BertConfig

__all__ = ["reading_one_way_work", "fine_tuning_chapter_work", "what_pretraining_buys_work",
           "inside_bert_work", "one_device_work"]

BBC_TOPIC_COUNT = 5  # the BBC desks that chapter 08's topic task tells apart


def reading_one_way_work(size: dict) -> list[Work]:
    """Chapter 01: each window model trains for `epochs` over every word of the training
    articles (90% of them): per example, 6 FLOPs (forward and backward) per weight of its
    two matrix products, the window's embeddings to the hidden layer and the hidden layer
    to the vocabulary. The glued model trains only its new output layer on two readers'
    features."""
    examples = size["epochs"] * 0.9 * size["articles"] * WIKITEXT_TOKENS_PER_ARTICLE
    dim, hidden, vocab = size["dim"], size["hidden"], size["vocab_size"]
    work = [Work(f"{name} reader, {width} words", 6 * (width * dim * hidden + hidden * vocab)
                 * examples)
            for name, width in [("left", 4), ("right", 4), ("both", 4), ("cheating", 5),
                                ("joint", 8)]]
    glued = 2 * (2 * 4 * dim * hidden) + 6 * (2 * hidden * vocab)  # frozen readers forward
    return work + [Work("glued readers, a new output layer", glued * examples)]


def inside_bert_work(size: dict) -> list[Work]:
    """Chapter 09: forward passes over the paragraphs the attention and probing sections
    read, each padded to max_length: an upper bound."""
    base = BertConfig.preset("bert-base", vocab_size=30522)
    paragraphs = size["attention_paragraphs"] + size["probe_paragraphs"]
    return [inference_work(f"BERT-base reads {paragraphs:,} paragraphs", base,
                           paragraphs * size["max_length"], size["max_length"])]


def fine_tuning_chapter_work(size: dict) -> list[Work]:
    """Chapter 07: the fine-tuning runs of its sections, each on at most its size's number
    of examples, counted in examples of `max_length` pieces (a tagging example of 2 x length
    counts twice, a SQuAD one three times)."""
    minilm = BertConfig.from_json(minilm_dir())
    length, sentiment, other = size["max_length"], size["sentiment_train"], size["other_train"]

    def seen(examples: int) -> float:  # fine_tune's steps: at least min_steps of a batch
        return max(size["min_steps"] * size["batch_size"], size["epochs"] * examples)

    return [  # sentiment; topic, headline match, link QA; link tagging (twice as long)
        fine_tuning_work("MiniLM on the five tasks", minilm,
                         seen(sentiment) + 3 * seen(other) + 2 * seen(other), length),
        fine_tuning_work("Colab only: SST-2, MRPC, CoNLL-2003, SQuAD", minilm,
                         6 * seen(size["benchmark_train"]), length),
        fine_tuning_work("few labels: chapter 06's model and scratch (bert-small)",
                         BertConfig.preset("bert-small"),
                         2 * 2 * _few_labels_examples(size, size["own_rates"]), length),
        fine_tuning_work("few labels: MiniLM", minilm,
                         2 * _few_labels_examples(size, size["minilm_rates"]), length),
    ]


def _few_labels_examples(size: dict, rates: tuple) -> float:
    """Examples one start reads on one task in chapter 07's few-labels comparison: every
    model compare_start trains reads 10 epochs of per_class x 2 labels."""
    runs = models_trained(len(rates), size["draws"], size["seeds"])
    return runs * 10 * size["per_class"] * 2


def what_pretraining_buys_work(size: dict) -> list[Work]:
    """Chapter 08: two pretrainings, then every fine-tuning run of its comparisons."""
    small = BertConfig.preset(size["mlm"]["model"], vocab_size=size["mlm"]["vocab_size"])
    minilm = BertConfig.from_json(minilm_dir())
    length = size["max_length"]

    def seen(examples: int) -> float:  # fine_tune's steps: at least min_steps of batch 16
        return max(size["min_steps"] * 16, size["epochs"] * examples)

    def comparison(rates: int) -> float:
        """compare_start at every label count with the rate grid; at the curve's other
        counts with one rate."""
        draws, seeds = size["draws"], size["seeds"]
        extra = [n for n in size["curve"] if n not in size["per_class"]]
        return (sum(models_trained(rates, draws, seeds) * seen(BBC_TOPIC_COUNT * n)
                    for n in size["per_class"])
                + sum(models_trained(1, draws, seeds) * seen(BBC_TOPIC_COUNT * n)
                      for n in extra))

    return [
        pretraining_work(size["mlm"], "pretraining, masked LM",
                         predicted_share=size["mlm"]["mask_probability"]),
        pretraining_work(size["ltr"], "pretraining, left-to-right", predicted_share=1.0),
        fine_tuning_work("topics: scratch, masked LM, left-to-right, chapter 06's", small,
                         4 * comparison(len(size["rates"])), length),
        fine_tuning_work("topics: MiniLM", minilm, comparison(len(size["minilm_rates"])),
                         length),
        fine_tuning_work("headline pairs: two objectives at two budgets", small,
                         4 * (len(size["pair_rates"]) + size["seeds"])
                         * size["pair_epochs"] * size["pair_examples"], length),
    ]


def one_device_work(size: dict) -> list[Work]:
    """Chapter 10: the training steps it times (four two-way comparisons, each variant run
    repeats + 2 times: a warm-up, the timed rounds, a memory measurement; and as many again,
    a generous allowance, for the profiler, accumulation and MFU cells), then the packing
    lever's passes over its documents (each at most `seq` tokens)."""
    config = BertConfig.preset(size["model"], vocab_size=30522)
    steps = 2 * 4 * 2 * (size["repeats"] + 2)
    passes = 2 * (max(1, size["repeats"] - 2) + 1)  # two layouts, with a warm-up each
    shape = f"{size['batch_size']} x {size['max_seq_length']}"
    return [training_work(f"{steps} timed steps of {shape}", config,
                          steps * size["batch_size"] * size["max_seq_length"],
                          size["max_seq_length"]),
            training_work(f"packing: {passes} passes over {size['documents']:,} documents",
                          config, passes * size["documents"] * size["max_seq_length"],
                          size["max_seq_length"])]
