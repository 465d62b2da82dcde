"""The architectures `python -m evaluator.trace --zoo` traces: a plain registry, name -> ZooModel.

Each entry builds a real architecture with random weights and no download (transformers model
classes from explicit config objects, torchvision/timm constructors without pretrained weights),
makes example inputs of the sizes used in practice, and says how to run one step: inference
(`infer`, under `no_grad`) or training (`train`: forward, loss, `loss.backward()`).

Contract with `evaluator.cases.trace`:
- `build()` and `make_inputs(model)` are called with the target device and the parameter dtype
  set as defaults (`torch.device(...)`, `torch.set_default_dtype`), usually inside a
  `FakeTensorMode`, so factories need no `device=`/`dtype=`; nothing here allocates real memory
  for a traced run. They are *not* recorded: only `step` (and the backward) is.
- `step(model, inputs)` runs the model. For `train` entries the tracer takes
  `loss_of(step(...))` (the step's scalar loss, `out.loss`, or a sum of the output) and calls
  `.backward()` on it; for `infer` entries the return value is ignored.
- `dtype` is the compute dtype. With `amp=True` (training only) parameters stay float32 and the
  step runs under `torch.autocast(dtype)`, the usual mixed-precision recipe.
- The model libraries are imported lazily, inside `build`, so this module imports with torch only;
  `missing_library(entry)` says why an entry cannot be built here.
- Config values are written out in full (not library defaults) so a different transformers
  version builds the same shapes.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from evaluator.cases.testcase import CODE_OF_DTYPE

Mode = Literal["infer", "train"]


def default_step(model: nn.Module, inputs: Any) -> Any:
    """Call the model with the inputs: a dict as keyword arguments, anything else positionally."""
    return model(**inputs) if isinstance(inputs, dict) else model(*inputs)


@dataclass(frozen=True)
class ZooModel:
    """One traced workload: an architecture, its inputs, and what one step does."""

    name: str
    library: str | None  # importable module the builder needs; None = torch only
    build: Callable[[], nn.Module]
    make_inputs: Callable[[nn.Module], Any]  # dict -> keyword args, tuple -> positional
    mode: Mode
    dtype: torch.dtype | None  # None: keep the dtype the builder gives
    amp: bool = False
    step: Callable[[nn.Module, Any], Any] = default_step
    sizes: str = ""  # human-readable batch/sequence/image sizes, for the docs and the log

    @property
    def precision(self) -> str:
        if self.dtype is None:
            return "as-built"
        code = CODE_OF_DTYPE[self.dtype]
        return f"amp-{code}" if self.amp else code


def missing_library(entry: ZooModel) -> str | None:
    """Why `entry` cannot be built here (its library is not installed), or None."""
    if entry.library is None:
        return None
    if importlib.util.find_spec(entry.library) is None:
        return f"{entry.library} is not installed (pip install 'atenforge[trace]')"
    return None


# ---------------------------------------------------------------- steps


def loss_of(out: Any) -> torch.Tensor:
    """The training loss of a model output: `.loss` when present, else the sum of the first tensor.

    The sum stands in for a real criterion when a model has none of its own; it adds one `sum`
    and an `expand` in the backward.
    """
    loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
        return out["loss"]
    if isinstance(out, torch.Tensor) and out.dim() == 0 and out.is_floating_point():
        return out
    first = _first_tensor(out)
    if first is None:
        raise TypeError(f"the model returned no tensor to take a loss of ({type(out).__name__})")
    return first.float().sum()


def _first_tensor(out: Any) -> torch.Tensor | None:
    if isinstance(out, torch.Tensor):
        return out if out.is_floating_point() else None
    values = out.values() if isinstance(out, dict) else out if isinstance(out, list | tuple) else ()
    for v in values:
        found = _first_tensor(v)
        if found is not None:
            return found
    return None


def hf_step(model: nn.Module, inputs: dict[str, Any]) -> Any:
    """A transformers forward; `.loss` exists when the inputs carry labels."""
    out = model(**inputs)
    return out.loss if getattr(out, "loss", None) is not None else out


def hf_generate_step(model: nn.Module, inputs: dict[str, Any]) -> Any:
    """LLM inference as served: a prefill over the prompt, then one cached decode step."""
    params = inspect.signature(model.forward).parameters
    cache_kw = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x
    out = model(**inputs, use_cache=True)
    cache = getattr(out, "cache", None)
    if cache is None:
        cache = getattr(out, "past_key_values", None)
    next_token = out.logits[:, -1:].argmax(dim=-1)
    return model(input_ids=next_token, use_cache=True, **{cache_kw: cache})


def classify_step(model: nn.Module, inputs: tuple[torch.Tensor, torch.Tensor]) -> Any:
    """An image classifier: logits, and cross-entropy against the labels when training."""
    images, labels = inputs
    out = model(images)
    if isinstance(out, dict):  # torchvision segmentation models return {'out': ..., 'aux': ...}
        out = out["out"]
    elif not isinstance(out, torch.Tensor):  # inception/googlenet named tuples in train mode
        out = out[0]
    if not model.training:
        return out
    # Logits [B, C] against [B] labels, or [B, C, H, W] against per-pixel [B, H, W] labels.
    return nn.functional.cross_entropy(out, labels)


# ---------------------------------------------------------------- builders


def _hf(model_class: str, config_class: str, **config: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        tf = importlib.import_module("transformers")
        cfg = getattr(tf, config_class)(**config)
        return getattr(tf, model_class)(cfg)

    return build


def _torchvision(name: str, submodule: str = "", **kwargs: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        module = importlib.import_module(
            "torchvision.models" + (f".{submodule}" if submodule else "")
        )
        return getattr(module, name)(weights=None, **kwargs)

    return build


def _timm(name: str, **kwargs: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        timm = importlib.import_module("timm")
        return timm.create_model(name, pretrained=False, **kwargs)

    return build


def _vocab(model: nn.Module) -> int:
    cfg = model.config  # type: ignore[attr-defined]
    text = getattr(cfg, "text_config", None)
    return int(getattr(text, "vocab_size", None) or cfg.vocab_size)


def _tokens(batch: int, seq: int, *, labels: str = "", mask: bool = False) -> Callable:
    """Token ids (and optionally an all-ones attention mask and labels) for a text model.

    labels: '' none, 'tokens' (LM: one label per token), 'class' (one label per sequence).
    """

    def make(model: nn.Module) -> dict[str, Any]:
        vocab = _vocab(model)
        ids = torch.randint(0, vocab, (batch, seq))
        inputs: dict[str, Any] = {"input_ids": ids}
        if mask:
            inputs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
        if labels == "tokens":
            inputs["labels"] = torch.randint(0, vocab, (batch, seq))
        elif labels == "class":
            inputs["labels"] = torch.randint(0, model.config.num_labels, (batch,))  # type: ignore[attr-defined]
        return inputs

    return make


def _seq2seq(batch: int, src: int, tgt: int, *, labels: bool) -> Callable:
    def make(model: nn.Module) -> dict[str, Any]:
        vocab = _vocab(model)
        inputs: dict[str, Any] = {
            "input_ids": torch.randint(0, vocab, (batch, src)),
            "attention_mask": torch.ones(batch, src, dtype=torch.long),
        }
        if labels:
            inputs["labels"] = torch.randint(0, vocab, (batch, tgt))
        else:
            inputs["decoder_input_ids"] = torch.randint(0, vocab, (batch, tgt))
        return inputs

    return make


def _images(batch: int, size: int, *, num_classes: int = 1000, dense: bool = False) -> Callable:
    """Images (default dtype) and class labels; `dense` gives one label per pixel."""

    def make(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        images = torch.randn(batch, 3, size, size)
        shape = (batch, size, size) if dense else (batch,)
        return images, torch.randint(0, num_classes, shape)

    return make


def _pixels(batch: int, size: int, *, labels: bool = False) -> Callable:
    def make(model: nn.Module) -> dict[str, Any]:
        inputs: dict[str, Any] = {"pixel_values": torch.randn(batch, 3, size, size)}
        if labels:
            inputs["labels"] = torch.randint(0, model.config.num_labels, (batch,))  # type: ignore[attr-defined]
        return inputs

    return make


def _whisper_inputs(batch: int, tgt: int) -> Callable:
    def make(model: nn.Module) -> dict[str, Any]:
        cfg = model.config  # type: ignore[attr-defined]
        frames = 2 * cfg.max_source_positions  # 30 s of audio: 3000 mel frames
        return {
            "input_features": torch.randn(batch, cfg.num_mel_bins, frames),
            "decoder_input_ids": torch.randint(0, cfg.vocab_size, (batch, tgt)),
        }

    return make


def _clip_inputs(batch: int) -> Callable:
    def make(model: nn.Module) -> dict[str, Any]:
        cfg = model.config  # type: ignore[attr-defined]
        text_len = cfg.text_config.max_position_embeddings
        size = cfg.vision_config.image_size
        return {
            "input_ids": torch.randint(0, cfg.text_config.vocab_size, (batch, text_len)),
            "attention_mask": torch.ones(batch, text_len, dtype=torch.long),
            "pixel_values": torch.randn(batch, 3, size, size),
        }

    return make


def _audio(batch: int, samples: int) -> Callable:
    def make(model: nn.Module) -> dict[str, Any]:
        return {"input_values": torch.randn(batch, samples)}

    return make


# ---------------------------------------------------------------- configs (explicit sizes)

_LLAMA_1B = dict(  # Llama-3.2-1B shapes
    vocab_size=128256,
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
    tie_word_embeddings=True,
    attn_implementation="sdpa",
)
_TINYLLAMA = dict(  # TinyLlama-1.1B shapes
    vocab_size=32000,
    hidden_size=2048,
    intermediate_size=5632,
    num_hidden_layers=22,
    num_attention_heads=32,
    num_key_value_heads=4,
    max_position_embeddings=2048,
    rms_norm_eps=1e-5,
    attn_implementation="sdpa",
)
_MISTRAL_7B = dict(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=32768,
    sliding_window=4096,
    rms_norm_eps=1e-5,
    attn_implementation="sdpa",
)
_QWEN2_05B = dict(
    vocab_size=151936,
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    tie_word_embeddings=True,
    attn_implementation="sdpa",
)
_GEMMA_2B = dict(
    vocab_size=256000,
    hidden_size=2048,
    intermediate_size=16384,
    num_hidden_layers=18,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=256,
    max_position_embeddings=8192,
    hidden_activation="gelu_pytorch_tanh",
    attn_implementation="sdpa",
)
_PHI3_MINI = dict(
    vocab_size=32064,
    hidden_size=3072,
    intermediate_size=8192,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    original_max_position_embeddings=4096,
    attn_implementation="sdpa",
)
_PYTHIA_410M = dict(
    vocab_size=50304,
    hidden_size=1024,
    intermediate_size=4096,
    num_hidden_layers=24,
    num_attention_heads=16,
    rotary_pct=0.25,
    max_position_embeddings=2048,
    use_parallel_residual=True,
    attn_implementation="sdpa",
)
_OPT_125M = dict(
    vocab_size=50272,
    hidden_size=768,
    ffn_dim=3072,
    word_embed_proj_dim=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    max_position_embeddings=2048,
    attn_implementation="sdpa",
)
_MIXTRAL_SMALL = dict(  # Mixtral's block structure (8 experts, top-2) at a size that runs for real
    vocab_size=32000,
    hidden_size=1024,
    intermediate_size=3584,
    num_hidden_layers=4,
    num_attention_heads=16,
    num_key_value_heads=4,
    num_local_experts=8,
    num_experts_per_tok=2,
    max_position_embeddings=4096,
    attn_implementation="sdpa",
)
_BERT_BASE = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
)
_BERT_TINY = dict(  # google/bert_uncased_L-2_H-128_A-2, a common small fine-tuning model
    vocab_size=30522,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=512,
    max_position_embeddings=512,
)
_ROBERTA_BASE = dict(_BERT_BASE, vocab_size=50265, max_position_embeddings=514, type_vocab_size=1)
_DISTILBERT = dict(vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072)
_ALBERT_BASE = dict(
    vocab_size=30000,
    embedding_size=128,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
)
_DEBERTA_V3_BASE = dict(
    vocab_size=128100,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    relative_attention=True,
    position_buckets=256,
    norm_rel_ebd="layer_norm",
    share_att_key=True,
    pos_att_type=["p2c", "c2p"],
    position_biased_input=False,
    max_relative_positions=-1,
    type_vocab_size=0,
)
_GPT2_SMALL = dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)
_T5_BASE = dict(
    vocab_size=32128,
    d_model=768,
    d_kv=64,
    d_ff=3072,
    num_layers=12,
    num_heads=12,
    pad_token_id=0,
    eos_token_id=1,
    decoder_start_token_id=0,
)
_BART_BASE = dict(
    vocab_size=50265,
    d_model=768,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=12,
    decoder_attention_heads=12,
    encoder_ffn_dim=3072,
    decoder_ffn_dim=3072,
    max_position_embeddings=1024,
)
_WHISPER_BASE = dict(
    vocab_size=51865,
    num_mel_bins=80,
    d_model=512,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=8,
    decoder_attention_heads=8,
    encoder_ffn_dim=2048,
    decoder_ffn_dim=2048,
    max_source_positions=1500,
    max_target_positions=448,
)
_WAV2VEC2_BASE = dict(
    vocab_size=32,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
)
_VIT_BASE = dict(
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    image_size=224,
    patch_size=16,
)


def _text(
    name: str,
    model_class: str,
    config_class: str,
    config: dict[str, Any],
    inputs: Callable[[nn.Module], Any],
    mode: Mode,
    dtype: torch.dtype,
    sizes: str,
    *,
    amp: bool = False,
    step: Callable[[nn.Module, Any], Any] = hf_step,
) -> ZooModel:
    """A transformers entry (text, speech or vision): model class + config class + config."""
    build = _hf(model_class, config_class, **config)
    return ZooModel(name, "transformers", build, inputs, mode, dtype, amp, step, sizes)


_F16, _BF16, _F32 = torch.float16, torch.bfloat16, torch.float32

_TRANSFORMERS: list[ZooModel] = [
    # encoders
    _text("bert_base_train", "BertForMaskedLM", "BertConfig", _BERT_BASE,
          _tokens(8, 512, labels="tokens", mask=True), "train", _BF16, "batch 8, seq 512", amp=True),
    _text("bert_tiny_finetune", "BertForSequenceClassification", "BertConfig", _BERT_TINY,
          _tokens(8, 128, labels="class", mask=True), "train", _F32, "batch 8, seq 128"),
    _text("roberta_base", "RobertaForSequenceClassification", "RobertaConfig", _ROBERTA_BASE,
          _tokens(16, 256, mask=True), "infer", _F16, "batch 16, seq 256"),
    _text("distilbert_base", "DistilBertForSequenceClassification", "DistilBertConfig", _DISTILBERT,
          _tokens(32, 128, mask=True), "infer", _F16, "batch 32, seq 128"),
    _text("albert_base_train", "AlbertForMaskedLM", "AlbertConfig", _ALBERT_BASE,
          _tokens(8, 512, labels="tokens", mask=True), "train", _F32, "batch 8, seq 512"),
    _text("deberta_v3_base", "DebertaV2ForSequenceClassification", "DebertaV2Config", _DEBERTA_V3_BASE,
          _tokens(8, 256, mask=True), "infer", _F16, "batch 8, seq 256"),
    # decoders
    _text("gpt2_train", "GPT2LMHeadModel", "GPT2Config", _GPT2_SMALL,
          _tokens(8, 1024, labels="tokens"), "train", _BF16, "batch 8, seq 1024"),
    _text("llama_1b", "LlamaForCausalLM", "LlamaConfig", _LLAMA_1B,
          _tokens(1, 1024), "infer", _BF16, "batch 1, prompt 1024 + 1 decode step",
          step=hf_generate_step),
    _text("tinyllama_train", "LlamaForCausalLM", "LlamaConfig", _TINYLLAMA,
          _tokens(4, 2048, labels="tokens"), "train", _BF16, "batch 4, seq 2048"),
    _text("mistral_7b", "MistralForCausalLM", "MistralConfig", _MISTRAL_7B,
          _tokens(1, 2048), "infer", _BF16, "batch 1, prompt 2048 + 1 decode step",
          step=hf_generate_step),
    _text("qwen2_0_5b", "Qwen2ForCausalLM", "Qwen2Config", _QWEN2_05B,
          _tokens(8, 512), "infer", _BF16, "batch 8, prompt 512 + 1 decode step",
          step=hf_generate_step),
    _text("gemma_2b", "GemmaForCausalLM", "GemmaConfig", _GEMMA_2B,
          _tokens(1, 1024), "infer", _BF16, "batch 1, prompt 1024 + 1 decode step",
          step=hf_generate_step),
    _text("phi3_mini", "Phi3ForCausalLM", "Phi3Config", _PHI3_MINI,
          _tokens(1, 1024), "infer", _F16, "batch 1, prompt 1024 + 1 decode step",
          step=hf_generate_step),
    _text("pythia_410m", "GPTNeoXForCausalLM", "GPTNeoXConfig", _PYTHIA_410M,
          _tokens(4, 512), "infer", _F16, "batch 4, prompt 512 + 1 decode step",
          step=hf_generate_step),
    _text("opt_125m", "OPTForCausalLM", "OPTConfig", _OPT_125M,
          _tokens(8, 512, mask=True), "infer", _F16, "batch 8, seq 512"),
    _text("mixtral_moe_small_train", "MixtralForCausalLM", "MixtralConfig", _MIXTRAL_SMALL,
          _tokens(2, 512, labels="tokens"), "train", _BF16, "batch 2, seq 512"),
    # encoder-decoders, speech, vision
    _text("t5_base_train", "T5ForConditionalGeneration", "T5Config", _T5_BASE,
          _seq2seq(8, 512, 128, labels=True), "train", _BF16, "batch 8, source 512, target 128",
          amp=True),
    _text("bart_base", "BartForConditionalGeneration", "BartConfig", _BART_BASE,
          _seq2seq(4, 512, 128, labels=False), "infer", _F16, "batch 4, source 512, target 128"),
    _text("whisper_base", "WhisperForConditionalGeneration", "WhisperConfig", _WHISPER_BASE,
          _whisper_inputs(4, 64), "infer", _F16, "batch 4, 30 s audio (80x3000 mel), 64 tokens"),
    _text("wav2vec2_base", "Wav2Vec2ForCTC", "Wav2Vec2Config", _WAV2VEC2_BASE,
          _audio(4, 160000), "infer", _F16, "batch 4, 10 s at 16 kHz"),
    _text("vit_base_hf_train", "ViTForImageClassification", "ViTConfig", _VIT_BASE,
          _pixels(32, 224, labels=True), "train", _BF16, "batch 32, 224x224", amp=True),
    _text("clip_vit_b32", "CLIPModel", "CLIPConfig", {},
          _clip_inputs(16), "infer", _F16, "batch 16 image-text pairs, 224x224, 77 tokens"),
    _text("segformer_b0", "SegformerForSemanticSegmentation", "SegformerConfig", {"num_labels": 150},
          _pixels(8, 512), "infer", _F16, "batch 8, 512x512"),
]  # fmt: skip

# Image models: (name, library, constructor, batch, image size, mode, dtype, amp). Constructors
# are torchvision.models.<name>(weights=None) and timm.create_model(<name>, pretrained=False).
_VISION_TABLE: list[tuple[str, str, str, int, int, Mode, torch.dtype, bool]] = [
    ("resnet50_train",        "torchvision", "resnet50",              32, 224, "train", _BF16, True),
    ("resnet50",              "torchvision", "resnet50",              64, 224, "infer", _F16,  False),
    ("resnet18_cifar_train",  "torchvision", "resnet18",              16, 32,  "train", _F32,  False),
    ("mobilenet_v3_large",    "torchvision", "mobilenet_v3_large",    64, 224, "infer", _F16,  False),
    ("efficientnet_b0_train", "torchvision", "efficientnet_b0",       32, 224, "train", _BF16, True),
    ("convnext_tiny",         "torchvision", "convnext_tiny",         32, 224, "infer", _BF16, False),
    ("vit_b_16",              "torchvision", "vit_b_16",              32, 224, "infer", _F16,  False),
    ("swin_t",                "torchvision", "swin_t",                32, 224, "infer", _F16,  False),
    ("densenet121",           "torchvision", "densenet121",           32, 224, "infer", _F16,  False),
    ("regnet_y_1_6gf_train",  "torchvision", "regnet_y_1_6gf",        32, 224, "train", _F32,  False),
    ("shufflenet_v2",         "torchvision", "shufflenet_v2_x1_0",    64, 224, "infer", _F16,  False),
    ("inception_v3",          "torchvision", "inception_v3",          32, 299, "infer", _F16,  False),
    ("vgg16",                 "torchvision", "vgg16",                 16, 224, "infer", _F16,  False),
    ("mixer_b16",             "timm",        "mixer_b16_224",         32, 224, "infer", _F16,  False),
    ("beit_base",             "timm",        "beit_base_patch16_224", 32, 224, "infer", _F16,  False),
    ("poolformer_s12",        "timm",        "poolformer_s12",        32, 224, "infer", _F16,  False),
    ("nfnet_l0_train",        "timm",        "nfnet_l0",              32, 224, "train", _BF16, True),
    ("levit_128",             "timm",        "levit_128",             64, 224, "infer", _F16,  False),
    ("tf_efficientnet_b0",    "timm",        "tf_efficientnet_b0",    32, 224, "infer", _F16,  False),
    ("cspdarknet53",          "timm",        "cspdarknet53",          16, 256, "infer", _F16,  False),
    ("eva02_tiny",            "timm",        "eva02_tiny_patch14_224", 32, 224, "infer", _F16, False),
]  # fmt: skip


def _vision(row: tuple[str, str, str, int, int, Mode, torch.dtype, bool]) -> ZooModel:
    name, library, constructor, batch, size, mode, dtype, amp = row
    build = _torchvision(constructor) if library == "torchvision" else _timm(constructor)
    inputs = _images(batch, size)
    return ZooModel(
        name,
        library,
        build,
        inputs,
        mode,
        dtype,
        amp,
        classify_step,
        f"batch {batch}, {size}x{size}",
    )


_SEGMENTATION = ZooModel(
    "deeplabv3_resnet50",
    "torchvision",
    _torchvision("deeplabv3_resnet50", "segmentation", weights_backbone=None, num_classes=21),
    _images(4, 520, num_classes=21, dense=True),
    "infer",
    _F16,
    step=classify_step,
    sizes="batch 4, 520x520",
)

ZOO: dict[str, ZooModel] = {
    entry.name: entry
    for entry in [*_TRANSFORMERS, *(_vision(row) for row in _VISION_TABLE), _SEGMENTATION]
}
