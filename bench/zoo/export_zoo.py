#!/usr/bin/python3
"""Exports the model zoo of kiln-bench-zoo to ONNX, with seeded inputs and PyTorch's outputs.

    /usr/bin/python3 bench/zoo/export_zoo.py OUTDIR [--models a,b] [--small] [--force] [--list]

Writes, for each model NAME, OUTDIR/NAME.onnx, a seeded random input OUTDIR/NAME.input.npy and
PyTorch's output for it OUTDIR/NAME.ref.npy (float32, computed in float64), like
scripts/export_models.py (same opset, same batch-norm treatment: random affine parameters,
running statistics calibrated on random batches, BatchNormalization nodes kept so that Kiln's
folding is what runs). Batch 1, random weights from a fixed seed per model (weights=None:
nothing is downloaded), eval mode. The five paper models are that script's own models, but
their references are computed here in float64 too.

The zoo (chosen for their operator families, issue 27):
  torchvision CNNs at 1x3x224x224: resnext50_32x4d, wide_resnet50_2, regnet_x_800mf,
    shufflenet_v2_x0_5, efficientnet_b3, efficientnet_v2_s, mobilenet_v3_large, mnasnet0_5,
    densenet169, alexnet, vgg16_bn, convnext_small; transformers at 224x224: vit_b_16, swin_t
  bert_base   BERT-base-style encoder built here from torch.nn modules: token ids [1,128] int64
              -> word + position + token-type embeddings, LayerNorm -> 12 post-LN layers (hidden
              768, 12 heads, FFN 3072, exact GELU) -> last hidden state [1,128,768]
  gpt2_small  GPT-2-style decoder stack: token ids [1,128] -> token + position embeddings ->
              12 pre-LN blocks (causal self-attention, 12 heads, MLP 3072 with tanh GELU) ->
              final LayerNorm -> hidden state [1,128,768] (no LM head)
  r3d_18, r2plus1d_18  torchvision video models (Conv3d; (2+1)D factorized convolutions with
              921-channel layers) on a 1x3x8x112x112 clip, random weights
  plus the five paper models of scripts/export_models.py (resnet18, mobilenet_v2, dqn, dcgan,
  lstm_lm), built by that script (same seeds and files as kiln-bench-models uses).

--small exports the CI variants instead, named NAME_small: the CNNs at 64x64, except alexnet and
vgg16_bn, which stay at 224x224 (their AdaptiveAvgPool to 6x6 / 7x7 exports to ONNX only when
it divides its input, which needs the full size); the video models on a 4x32x32 clip; vit_b_16 at 64x64 with 2 layers; swin_t's
layout at 64x64 with one block per stage; the two text models with 2 layers, sequence length 16
and a 1000-token vocabulary. The paper models are not part of --small (the end-to-end tests
export those with scripts/export_models.py).

Parameters that the torchvision initialisers set to constants are randomised, so that every
op's arithmetic is exercised: zero biases, LayerNorm/GroupNorm scale and shift, ConvNeXt's
layer scale (1e-6, which would hide the residual branches), ViT's zero-initialised head.
Models whose files exist and are newer than this script are skipped unless --force is given.
This script only makes benchmark and test data; Kiln itself never runs Python.
"""
import argparse
import copy
import math
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts"))
import export_models  # noqa: E402  (the paper models and the shared helpers)

OPSET = export_models.OPSET
PAPER_MODELS = list(export_models.MODELS)


# ---------------------------------------------------------------------------------------------
# Transformers built from torch.nn modules


class BertLayer(nn.Module):
    """One post-LN BERT encoder layer: self-attention + Add&LayerNorm, FFN (GELU) + Add&LN."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.output = nn.Linear(ffn, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)

    def split(self, x):  # [b, s, h*d] -> [b, h, s, d]
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x):
        b, s, hidden = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, hidden)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.out_norm(x + self.output(self.act(self.intermediate(x))))


class BertEncoder(nn.Module):
    """BERT-base-style encoder (Devlin et al. 2019): embeddings + `layers` encoder layers."""

    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, ffn=3072, max_pos=512):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))
        for emb in (self.word, self.position, self.token_type):
            nn.init.normal_(emb.weight, 0.0, 0.02)

    def forward(self, ids):
        s = ids.shape[1]
        pos = torch.arange(s, dtype=torch.int64).unsqueeze(0)
        x = self.word(ids) + self.position(pos) + self.token_type(torch.zeros_like(pos))
        x = self.norm(x)
        for layer in self.layers:
            x = layer(x)
        return x


class GPT2Block(nn.Module):
    """One pre-LN GPT-2 block: x + attn(ln1(x)) with a causal mask, x + mlp(ln2(x))."""

    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc_proj = nn.Linear(4 * hidden, hidden)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def attention(self, x):
        b, s, hidden = x.shape
        q, k, v = self.qkv(x).split(hidden, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        # As Hugging Face's GPT-2 does: masked scores get the most negative float, not -inf.
        scores = torch.where(self.causal[:s, :s], scores,
                             torch.tensor(torch.finfo(torch.float32).min))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.proj(ctx.transpose(1, 2).reshape(b, s, hidden))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc_proj(self.act(self.fc(self.ln2(x))))


class GPT2Stack(nn.Module):
    """GPT-2-small-style decoder (Radford et al. 2019) without the LM head."""

    def __init__(self, vocab=50257, hidden=768, layers=12, heads=12, seq=128):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(1024, hidden)
        self.blocks = nn.ModuleList(GPT2Block(hidden, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        nn.init.normal_(self.wte.weight, 0.0, 0.02)
        nn.init.normal_(self.wpe.weight, 0.0, 0.01)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], dtype=torch.int64).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


# ---------------------------------------------------------------------------------------------
# The zoo


def randomize_constant_init(model):
    """Randomises parameters that the initialisers leave constant (see the module docstring)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.LayerNorm, nn.GroupNorm)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.25, 0.25)
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):  # ConvNeXt: 1e-6 everywhere
                p.uniform_(0.1, 0.5)
            elif p.dim() == 1 and bool((p == 0).all()):  # zero biases
                p.uniform_(-0.1, 0.1)
            elif p.dim() >= 2 and bool((p == 0).all()):  # ViT's head
                nn.init.normal_(p, 0.0, 1.0 / math.sqrt(p[0].numel()))


def calibrate_batch_norms(model, make_batch, batches):
    """export_models.calibrate_batch_norms, with the running means perturbed relative to each
    channel's standard deviation rather than by an absolute amount: deep random networks
    (EfficientNet's SE-gated channels) have channels of variance ~1e-6, where an absolute shift
    of 0.05 is amplified 300-fold per layer and the output becomes ill-conditioned noise."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.25, 0.25)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(batches):
            model(make_batch())
        for bn in bns:
            std = bn.running_var.sqrt()
            bn.running_mean.add_(torch.empty_like(bn.running_mean).uniform_(-0.05, 0.05) * std)
            bn.running_var.mul_(torch.empty_like(bn.running_var).uniform_(0.8, 1.25))
    model.eval()


def torchvision_cnn(arch, **kwargs):
    def make(size):
        import torchvision
        m = getattr(torchvision.models, arch)(weights=None, **kwargs)
        randomize_constant_init(m)
        calibrate_batch_norms(m, lambda: torch.randn(2, 3, size, size), 2)
        return m, torch.randn(1, 3, size, size)
    return make


def video(arch, frames, size):
    """A torchvision video model (Conv3d / factorized (2+1)D convolutions) on one clip."""
    import torchvision.models.video
    m = getattr(torchvision.models.video, arch)(weights=None)
    randomize_constant_init(m)
    calibrate_batch_norms(m, lambda: torch.randn(2, 3, frames, size, size), 2)
    return m, torch.randn(1, 3, frames, size, size)


def vit(size, small):
    import torchvision
    if small:  # vit_b_16's layout with 2 layers
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=size, patch_size=16, num_layers=2, num_heads=12,
                              hidden_dim=768, mlp_dim=3072)
    else:
        m = torchvision.models.vit_b_16(weights=None)
    randomize_constant_init(m)
    return m, torch.randn(1, 3, size, size)


def swin(size, small):
    import torchvision
    if small:  # swin_t's layout with one block per stage
        from torchvision.models.swin_transformer import SwinTransformer
        m = SwinTransformer(patch_size=[4, 4], embed_dim=96, depths=[1, 1, 1, 1],
                            num_heads=[3, 6, 12, 24], window_size=[7, 7],
                            stochastic_depth_prob=0.2)
    else:
        m = torchvision.models.swin_t(weights=None)
    randomize_constant_init(m)
    return m, torch.randn(1, 3, size, size)


def text_model(cls):
    def make(seq, layers, vocab=None):
        kw = dict(layers=layers, vocab=vocab) if vocab else dict(layers=layers)
        m = cls(**kw) if cls is BertEncoder else cls(seq=seq, **kw)
        randomize_constant_init(m)
        vocab = m.word.num_embeddings if cls is BertEncoder else m.wte.num_embeddings
        return m, torch.randint(0, vocab, (1, seq), dtype=torch.int64)
    return make


def cnn(arch, small_size=64, **kwargs):
    make = torchvision_cnn(arch, **kwargs)
    return (lambda: make(224)), (lambda: make(small_size))


ZOO = {
    "resnext50_32x4d": cnn("resnext50_32x4d"),
    "wide_resnet50_2": cnn("wide_resnet50_2"),
    "regnet_x_800mf": cnn("regnet_x_800mf"),
    "shufflenet_v2_x0_5": cnn("shufflenet_v2_x0_5"),
    "efficientnet_b3": cnn("efficientnet_b3"),
    "efficientnet_v2_s": cnn("efficientnet_v2_s"),
    "mobilenet_v3_large": cnn("mobilenet_v3_large"),
    "mnasnet0_5": cnn("mnasnet0_5"),
    "densenet169": cnn("densenet169"),
    "alexnet": cnn("alexnet", small_size=224),
    "vgg16_bn": cnn("vgg16_bn", small_size=224),
    "convnext_small": cnn("convnext_small"),
    "vit_b_16": (lambda: vit(224, False), lambda: vit(64, True)),
    "swin_t": (lambda: swin(224, False), lambda: swin(64, True)),
    "bert_base": (lambda: text_model(BertEncoder)(128, 12),
                  lambda: text_model(BertEncoder)(16, 2, vocab=1000)),
    "gpt2_small": (lambda: text_model(GPT2Stack)(128, 12),
                   lambda: text_model(GPT2Stack)(16, 2, vocab=1000)),
    "r3d_18": (lambda: video("r3d_18", 8, 112), lambda: video("r3d_18", 4, 32)),
    "r2plus1d_18": (lambda: video("r2plus1d_18", 8, 112), lambda: video("r2plus1d_18", 4, 32)),
}


def build(name, small=False):
    """The model `name` (a zoo or paper model; with `small`, the zoo model's CI variant) in eval
    mode and its input, the same on every call (seeded per model)."""
    if name in PAPER_MODELS:
        return export_models.build(name)
    seed = 2000 + sorted(ZOO).index(name)
    torch.manual_seed(seed)
    np.random.seed(seed)
    model, x = ZOO[name][1 if small else 0]()
    return model.eval(), x


def export(name, small, outdir, force):
    """Writes OUTDIR/STEM.{onnx,input.npy,ref.npy}, STEM = name, or name + "_small"."""
    stem = name + "_small" if small else name
    paths = [os.path.join(outdir, stem + ext) for ext in (".onnx", ".input.npy", ".ref.npy")]
    newest_script = max(os.path.getmtime(os.path.abspath(__file__)),
                        os.path.getmtime(os.path.abspath(export_models.__file__)))
    if not force and all(os.path.exists(p) for p in paths) and \
            os.path.getmtime(paths[0]) >= newest_script:
        print(f"{stem}: up to date", flush=True)
        return
    model, x = build(name, small)
    with torch.no_grad():  # the reference in float64, so that it holds only Kiln's error
        ref = copy.deepcopy(model).double()(x if x.dtype == torch.int64 else x.double())
    onnx_path, input_path, ref_path = paths
    tmp = onnx_path + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Not under no_grad: nn.MultiheadAttention (ViT) would take its fused inference path,
        # aten::_native_multi_head_attention, which has no ONNX export.
        torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["input"],
                          output_names=["output"], do_constant_folding=True,
                          training=torch.onnx.TrainingMode.PRESERVE)
    import onnx
    onnx.checker.check_model(tmp)  # by path: vgg16_bn and the like pass 500 MB of weights
    np.save(input_path, x.numpy())
    np.save(ref_path, ref.numpy().astype(np.float32))
    os.replace(tmp, onnx_path)  # last: its presence means the three files are complete
    print(f"{stem}: {onnx_path} input {tuple(x.shape)} {x.dtype} -> output {tuple(ref.shape)}",
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--models", default="",
                    help="comma-separated subset (default: all); known: " +
                    ", ".join(list(ZOO) + PAPER_MODELS))
    ap.add_argument("--small", action="store_true",
                    help="the small CI variants NAME_small of the zoo models")
    ap.add_argument("--force", action="store_true", help="re-export existing models")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    known = list(ZOO) if args.small else list(ZOO) + PAPER_MODELS
    names = [n for n in args.models.split(",") if n] or known
    if args.list:
        print(",".join(names))
        return
    if not args.outdir:
        ap.error("OUTDIR is required")
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"export_zoo.py: unknown model(s) {', '.join(unknown)}; known: {', '.join(known)}")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    failed = []
    for n in names:
        try:
            export(n, args.small, args.outdir, args.force)
        except Exception as e:  # noqa: BLE001 - report every model that fails, then fail
            print(f"{n}: export failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(n)
    if failed:
        sys.exit(f"export_zoo.py: {len(failed)} model(s) failed to export: {', '.join(failed)}")


if __name__ == "__main__":
    main()
