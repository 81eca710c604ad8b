"""FAKE hf_adapter: load_pretrained_config and a greedy generation adapter over the CPU model."""

import json
from pathlib import Path


def load_pretrained_config(model_path):
    def load():
        return json.loads((Path(model_path) / "config.json").read_text())

    return load


class HuggingFaceGenerationAdapter:
    def __init__(self, model):
        self.model = model

    def generate(self, input_ids, attention_mask=None, max_new_tokens=8, do_sample=False, **kw):
        import torch

        ids = input_ids
        with torch.no_grad():
            for _ in range(max_new_tokens):
                nxt = self.model.hf(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
                ids = torch.cat([ids, nxt], dim=1)
        return ids
