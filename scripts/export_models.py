#!/usr/bin/python3
"""Exports the end-to-end test and benchmark models to ONNX, with inputs and PyTorch's outputs.

    /usr/bin/python3 scripts/export_models.py OUTDIR [--models resnet18,dqn] [--force]

Writes, for each model NAME, OUTDIR/NAME.onnx, a seeded random input OUTDIR/NAME.input.npy and
PyTorch's output for it OUTDIR/NAME.ref.npy (float32). All models are batch 1, randomly
initialised (weights=None: nothing is downloaded) from fixed seeds, in eval mode:

  resnet18      torchvision ResNet-18, input 1x3x224x224
  mobilenet_v2  torchvision MobileNetV2, input 1x3x224x224
  dqn           the Nature DQN (Mnih et al. 2015): 4x84x84 -> conv 32 8x8/4 -> conv 64 4x4/2 ->
                conv 64 3x3/1 -> fc 512 -> fc 18, ReLUs
  dcgan         the DCGAN generator (Radford et al. 2016, ngf 64): z 100x1x1 -> 3x64x64, Tanh
  lstm_lm       2-layer LSTM language model (vocab 10000, 200 dims), token ids [35, 1] int64 in,
                logits [35, 1, 10000] out

Batch norms get random affine parameters and running statistics calibrated on a few random
batches in train mode, and are exported as BatchNormalization nodes (training=PRESERVE on an
eval-mode model, which skips the exporter's own conv+BN folding), so the compiler's folding is
what gets tested. Models whose files exist and are newer than this script are skipped unless
--force is given.
This script only makes test data and references; Kiln itself never runs Python.
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

OPSET = 13


class NatureDQN(nn.Module):
    """The Q-network of Mnih et al., Nature 2015 (18 actions: the full Atari action set)."""

    def __init__(self, n_actions=18):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU())
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, n_actions))

    def forward(self, x):
        return self.head(self.features(x))


class DCGANGenerator(nn.Module):
    """The DCGAN generator (Radford et al.; PyTorch's dcgan example), nz 100, ngf 64, 3 channels."""

    def __init__(self, nz=100, ngf=64, nc=3):
        super().__init__()
        layers = []
        chans = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
        for i in range(4):
            stride, pad = (1, 0) if i == 0 else (2, 1)
            layers += [nn.ConvTranspose2d(chans[i], chans[i + 1], 4, stride, pad, bias=False),
                       nn.BatchNorm2d(chans[i + 1]), nn.ReLU(True)]
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)
        for m in self.modules():  # the paper's initialisation
            if isinstance(m, nn.ConvTranspose2d):
                nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, z):
        return self.main(z)


class LSTMLanguageModel(nn.Module):
    """Embedding -> 2-layer LSTM -> Linear (PyTorch's word_language_model, no dropout at eval)."""

    def __init__(self, vocab=10000, dim=200, layers=2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, dim)
        self.rnn = nn.LSTM(dim, dim, layers)
        self.decoder = nn.Linear(dim, vocab)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens):
        out, _ = self.rnn(self.encoder(tokens))
        return self.decoder(out)


def calibrate_batch_norms(model, make_batch, batches):
    """Gives every batch norm random gamma/beta, then running stats from random batches."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    with torch.no_grad():
        for bn in bns:
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.25, 0.25)
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(batches):
            model(make_batch())
        # Perturb the stats a little so they are not exactly the batch statistics.
        for bn in bns:
            bn.running_mean.add_(torch.empty_like(bn.running_mean).uniform_(-0.05, 0.05))
            bn.running_var.mul_(torch.empty_like(bn.running_var).uniform_(0.8, 1.25))
    model.eval()


def make_resnet18():
    import torchvision
    m = torchvision.models.resnet18(weights=None)
    calibrate_batch_norms(m, lambda: torch.randn(2, 3, 224, 224), 2)
    return m, torch.randn(1, 3, 224, 224)


def make_mobilenet_v2():
    import torchvision
    m = torchvision.models.mobilenet_v2(weights=None)
    calibrate_batch_norms(m, lambda: torch.randn(2, 3, 224, 224), 2)
    return m, torch.randn(1, 3, 224, 224)


def make_dqn():
    m = NatureDQN().eval()
    return m, torch.rand(1, 4, 84, 84)  # pixel values scaled to [0, 1)


def make_dcgan():
    m = DCGANGenerator()
    calibrate_batch_norms(m, lambda: torch.randn(8, 100, 1, 1), 4)
    return m, torch.randn(1, 100, 1, 1)


def make_lstm_lm():
    m = LSTMLanguageModel().eval()
    return m, torch.randint(0, 10000, (35, 1), dtype=torch.int64)


MODELS = {
    "resnet18": make_resnet18,
    "mobilenet_v2": make_mobilenet_v2,
    "dqn": make_dqn,
    "dcgan": make_dcgan,
    "lstm_lm": make_lstm_lm,
}


def build(name):
    """The model `name` in eval mode and its input, the same on every call (seeded per model,
    so exporting a subset gives the same files as exporting all; bench/baselines.py rebuilds the
    PyTorch models this way)."""
    seed = 1000 + sorted(MODELS).index(name)
    torch.manual_seed(seed)
    np.random.seed(seed)
    model, x = MODELS[name]()
    return model.eval(), x


def export(name, outdir, force):
    paths = [os.path.join(outdir, name + ext) for ext in (".onnx", ".input.npy", ".ref.npy")]
    if not force and all(os.path.exists(p) for p in paths) and \
            os.path.getmtime(paths[0]) >= os.path.getmtime(os.path.abspath(__file__)):
        print(f"{name}: up to date")
        return
    model, x = build(name)
    with torch.no_grad():
        ref = model(x)
    onnx_path, input_path, ref_path = paths
    tmp = onnx_path + ".tmp"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), tmp, opset_version=OPSET, input_names=["input"],
                          output_names=["output"], do_constant_folding=True,
                          training=torch.onnx.TrainingMode.PRESERVE)
    import onnx
    onnx.checker.check_model(onnx.load(tmp))
    np.save(input_path, x.numpy())
    np.save(ref_path, ref.numpy().astype(np.float32))
    os.replace(tmp, onnx_path)  # last: its presence means the three files are complete
    print(f"{name}: {onnx_path} input {tuple(x.shape)} {x.dtype} -> output {tuple(ref.shape)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset of: " + ", ".join(MODELS))
    ap.add_argument("--force", action="store_true", help="re-export existing models")
    args = ap.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"export_models.py: unknown model(s) {', '.join(unknown)}; "
                 f"known: {', '.join(MODELS)}")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for n in names:
        export(n, args.outdir, args.force)


if __name__ == "__main__":
    main()
