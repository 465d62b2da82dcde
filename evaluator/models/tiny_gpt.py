"""A small nanoGPT-style language model and its data, for the model-level backend check.

Contract:
- `GPT(config)`: token + position embedding, `n_layer` blocks of LayerNorm -> causal
  self-attention -> LayerNorm -> MLP (GELU), a final LayerNorm and a head tied to the token
  embedding; `model(idx, targets)` returns `(logits, loss)` with a cross-entropy loss (None
  without targets). Attention is written with matmul + masked_fill + softmax, not SDPA, so the
  ordinary ATen overloads a kernel directory holds (`bmm`, `_softmax`, `masked_fill` ...) are what
  the model dispatches, on every device.
- `PRESETS`: "tiny" (CPU, Triton's interpreter: a handful of tiny tensors) and "small" (GPU:
  4 layers, 256 wide, 128 tokens of context, batch 32).
- `CharData.load()` reads the bundled `data/tiny_corpus.txt` (text written for this project);
  `CharData.generated()` builds a deterministic procedural text instead. `get_batch` draws from
  a caller-owned `torch.Generator`, so two runs with the same seed see the same batches.
- No dropout: two runs from the same seed differ only by the kernels that computed them.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

CORPUS = Path(__file__).resolve().parents[1] / "data" / "tiny_corpus.txt"


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 96
    block_size: int = 128  # tokens of context
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 256
    batch_size: int = 32
    learning_rate: float = 1e-3

    def to_json(self) -> dict:
        return asdict(self)

    def with_vocab(self, vocab_size: int) -> GPTConfig:
        return replace(self, vocab_size=vocab_size)


PRESETS: dict[str, GPTConfig] = {
    # Triton's interpreter runs every program in numpy: keep every tensor tiny.
    "tiny": GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32, batch_size=4),
    "small": GPTConfig(block_size=128, n_layer=4, n_head=4, n_embd=256, batch_size=32),
}


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        mask = torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, config.block_size, config.block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self.apply(self._init_weights)
        # GPT-2's scaled init of the residual projections.
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(
                f"sequence of {T} tokens is longer than block_size {self.config.block_size}"
            )
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# --------------------------------------------------------------------------- data


@dataclass
class CharData:
    """A character-level token stream and its vocabulary."""

    text: str
    chars: list[str]
    tokens: torch.Tensor  # int64, on the CPU
    source: str

    @classmethod
    def from_text(cls, text: str, source: str) -> CharData:
        chars = sorted(set(text))
        index = {c: i for i, c in enumerate(chars)}
        tokens = torch.tensor([index[c] for c in text], dtype=torch.long)
        return cls(text=text, chars=chars, tokens=tokens, source=source)

    @classmethod
    def load(cls, path: Path | str = CORPUS) -> CharData:
        path = Path(path)
        return cls.from_text(path.read_text(encoding="utf-8"), source=str(path))

    @classmethod
    def generated(cls, num_chars: int = 200_000, seed: int = 0) -> CharData:
        return cls.from_text(generated_text(num_chars, seed), source=f"generated(seed={seed})")

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def get_batch(
        self,
        batch_size: int,
        block_size: int,
        generator: torch.Generator,
        device: str | torch.device,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows (x, y = x shifted by one), drawn with `generator` on the CPU."""
        n = self.tokens.numel() - block_size - 1
        if n <= 0:
            raise ValueError(
                f"text of {self.tokens.numel()} tokens is too short for block_size {block_size}"
            )
        starts = torch.randint(0, n, (batch_size,), generator=generator).tolist()
        # Slices and a stack, not index arithmetic: an enabled backend whose add kernel handles
        # only floats must not break the data pipeline.
        x = torch.stack([self.tokens[s : s + block_size] for s in starts])
        y = torch.stack([self.tokens[s + 1 : s + 1 + block_size] for s in starts])
        return x.to(device), y.to(device)


_SUBJECTS = [
    "the keeper",
    "a heron",
    "the miller",
    "an old clock",
    "the river",
    "my neighbour",
    "the ferry",
]
_VERBS = ["watches", "remembers", "carries", "counts", "follows", "mends", "crosses"]
_OBJECTS = [
    "the grey tide",
    "seven lanterns",
    "a paper boat",
    "the winter road",
    "the bells",
    "an empty field",
]
_ENDINGS = [
    "at dawn",
    "before the rain",
    "without a word",
    "once more",
    "in the long evening",
    "slowly",
]


def generated_text(num_chars: int, seed: int = 0) -> str:
    """Sentences from a small grammar, seeded: a stand-in corpus that needs no file."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < num_chars:
        s = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_ENDINGS)}."
        s = s[0].upper() + s[1:] + ("\n" if rng.random() < 0.2 else " ")
        parts.append(s)
        size += len(s)
    return "".join(parts)[:num_chars]
