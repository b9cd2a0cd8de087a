"""peft's LoRA on bertlib heads, as a peft user runs it on transformers' BERT: wrap with a
task type, train, save and reload the adapter, merge, save the merged model, and load the
result in bertlib and in transformers with the same logits."""

import pytest
import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model
from transformers.utils import logging as transformers_logging

import bertlib

transformers_logging.set_verbosity_error()
transformers_logging.disable_progress_bar()

TINY = bertlib.BertConfig(vocab_size=300, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=64,
                          max_position_embeddings=40, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
# peft task type -> (bertlib head, transformers Auto class, label shape per row)
TASKS = {
    "SEQ_CLS": (bertlib.BertForSequenceClassification,
                transformers.AutoModelForSequenceClassification, ()),
    "TOKEN_CLS": (bertlib.BertForTokenClassification,
                  transformers.AutoModelForTokenClassification, (10,)),
}


def _data(label_shape: tuple[int, ...]) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 300, (8, 10), generator=generator)
    labels = torch.randint(0, 3, (8, *label_shape), generator=generator)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}


def _trained_lora(task: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    head, _, label_shape = TASKS[task]
    torch.manual_seed(0)
    model = get_peft_model(head(TINY, num_labels=3),
                           LoraConfig(task_type=task, r=4, lora_alpha=8,
                                      target_modules=["query", "value"]))
    data = _data(label_shape)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(60):
        loss = model(**data).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], "LoRA training should fit eight examples"
    return model.eval(), data


@pytest.mark.parametrize("task", TASKS)
def test_lora_trains_and_only_the_adapters_and_head_learn(task):
    model, _ = _trained_lora(task)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name or "classifier" in name for name in trainable)
    assert any(p.detach().abs().max() > 0 for name, p in model.named_parameters()
               if "lora_B" in name), "lora_B starts at zero; training must move it"


@pytest.mark.parametrize("task", TASKS)
def test_the_adapter_saves_and_loads_back(task, tmp_path):
    model, data = _trained_lora(task)
    model.save_pretrained(tmp_path)
    head = TASKS[task][0]
    torch.manual_seed(0)  # the same base weights as the trained model started from
    again = PeftModel.from_pretrained(head(TINY, num_labels=3), tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(again(**data).logits, model(**data).logits)


@pytest.mark.parametrize("task", TASKS)
def test_the_merged_model_loads_in_bertlib_and_transformers_alike(task, tmp_path):
    model, data = _trained_lora(task)
    with torch.no_grad():
        adapted = model(**data).logits
    merged = model.merge_and_unload()
    assert type(merged) is TASKS[task][0]
    merged.save_pretrained(tmp_path)
    ours = TASKS[task][0].from_pretrained(tmp_path)
    theirs = TASKS[task][1].from_pretrained(tmp_path).eval()
    inputs = {key: value for key, value in data.items() if key != "labels"}
    with torch.no_grad():
        torch.testing.assert_close(ours(**inputs).logits, adapted, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(theirs(**inputs).logits, adapted, atol=1e-5, rtol=1e-4)
