#!/usr/bin/env python3
"""Baselines of kiln-bench-models: runs one model on one framework and prints one JSON line.

    .venv-bench/bin/python bench/baselines.py --runtime ort --models-dir DIR --model resnet18 \
        --threads 1 [--warmup 3] [--reps 20] [--max-seconds 10]

Runtimes (each measured in its own process, started by kiln-bench-models):
  ort    ONNX Runtime on DIR/MODEL.onnx: all graph optimizations, intra_op_num_threads =
         --threads, inter_op 1, sequential execution.
  torch  PyTorch on the model rebuilt by scripts/export_models.py (same seed, same weights),
         torch.set_num_threads(--threads); eager and TorchScript-frozen (trace + freeze +
         optimize_for_inference) are both timed and the faster is reported.
  tvm    Apache TVM (PyPI's apache-tvm) from DIR/MODEL.onnx with its ONNX frontend, default
         untuned schedules, target "llvm -mcpu=native", its thread pool set to --threads.
  list   prints which of the runtimes import here.

The JSON line holds: runtime, variant, compile_ms, min_ms, median_ms, reps, rel_error
(max|out - ref| / max|ref| against DIR/MODEL.ref.npy), rss_after_import_kb (resident memory
once the framework is imported), peak_rss_kb (VmHWM at the end); or "error" with a
message (exit status 3) when the runtime is missing or fails on the model.
Used only for benchmarking: Kiln itself never runs Python.
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def status_kb(field):
    """A field of /proc/self/status in KiB: "VmRSS:" (now) or "VmHWM:" (peak)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def rel_error(out, ref):
    import numpy as np
    out = np.asarray(out, dtype=np.float64).reshape(-1)
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    if out.shape != ref.shape or not np.all(np.isfinite(out)):
        return float("inf")
    return float(np.max(np.abs(out - ref)) / max(np.max(np.abs(ref)), 1e-30))


def time_runs(fn, warmup, reps, max_seconds):
    """Warm-up calls, then up to `reps` timed calls (at least 3, stopping once `max_seconds` of
    timed calls have passed). Returns (min_ms, median_ms, count)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < reps and (len(times) < 3 or time.perf_counter() - start < max_seconds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return min(times), statistics.median(times), len(times)


def run_ort(args, x, ref):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    path = os.path.join(args.models_dir, args.model + ".onnx")
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    compile_ms = (time.perf_counter() - t0) * 1e3
    name = sess.get_inputs()[0].name
    feed = {name: x}
    out = sess.run(None, feed)[0]
    mn, med, n = time_runs(lambda: sess.run(None, feed), args.warmup, args.reps, args.max_seconds)
    return dict(variant="onnxruntime " + ort.__version__, compile_ms=compile_ms, min_ms=mn,
                median_ms=med, reps=n, rel_error=rel_error(out, ref))


def run_torch(args, x, ref):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import export_models
    torch.set_num_threads(args.threads)
    model, tx = export_models.build(args.model)
    tx = torch.from_numpy(x)
    results = []
    with torch.no_grad():
        out = model(tx)
        err = rel_error(out.numpy(), ref)
        mn, med, n = time_runs(lambda: model(tx), args.warmup, args.reps, args.max_seconds)
        results.append(dict(variant="eager", compile_ms=0.0, min_ms=mn, median_ms=med, reps=n,
                            rel_error=err))
        try:
            t0 = time.perf_counter()
            frozen = torch.jit.freeze(torch.jit.trace(model, (tx,)).eval())
            try:
                frozen = torch.jit.optimize_for_inference(frozen)
            except Exception:  # noqa: BLE001 - not every model gets through; frozen is enough
                pass
            out = frozen(tx)
            out = frozen(tx)  # the profiling executor specialises on the first calls
            compile_ms = (time.perf_counter() - t0) * 1e3
            err = rel_error(out.numpy(), ref)
            mn, med, n = time_runs(lambda: frozen(tx), args.warmup, args.reps, args.max_seconds)
            results.append(dict(variant="torchscript-frozen", compile_ms=compile_ms, min_ms=mn,
                                median_ms=med, reps=n, rel_error=err))
        except Exception as e:  # noqa: BLE001 - fall back to eager
            print(f"baselines.py: torchscript failed on {args.model}: {e}", file=sys.stderr)
    best = min(results, key=lambda r: r["median_ms"])
    best["compile_ms"] = results[-1]["compile_ms"]  # TorchScript's trace + freeze time
    best["variant"] = f"torch {torch.__version__} {best['variant']}"
    return best


def run_tvm(args, x, ref):
    import numpy as np
    import onnx
    import tvm
    # "llvm -mcpu=native": newer TVM wants the host CPU named (from_device does that).
    try:
        target = tvm.target.Target.from_device(tvm.cpu())
    except Exception:  # noqa: BLE001 - older TVM: the string form
        target = tvm.target.Target("llvm -mcpu=native")
    model = onnx.load(os.path.join(args.models_dir, args.model + ".onnx"))
    in_name = model.graph.input[0].name
    try:
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx
    except ImportError:
        relax = None
    t0 = time.perf_counter()
    if relax is not None:  # TVM >= 0.15: Relax
        mod = from_onnx(model, shape_dict={in_name: list(x.shape)}, keep_params_in_input=False)
        mod = relax.transform.DecomposeOpsForInference()(mod)
        build = getattr(tvm, "compile", None) or relax.build
        ex = build(mod, target=target)
        vm = relax.VirtualMachine(ex, tvm.cpu())
        compile_ms = (time.perf_counter() - t0) * 1e3
        arr = tvm.runtime.tensor(x) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(x)

        def call():
            return vm["main"](arr)
    else:  # older TVM: Relay
        from tvm import relay
        from tvm.contrib import graph_executor
        mod, params = relay.frontend.from_onnx(model, shape={in_name: x.shape},
                                               dtype={in_name: str(x.dtype)})
        with tvm.transform.PassContext(opt_level=3):
            lib = relay.build(mod, target=target, params=params)
        gm = graph_executor.GraphModule(lib["default"](tvm.cpu()))
        gm.set_input(in_name, x)
        compile_ms = (time.perf_counter() - t0) * 1e3

        def call():
            gm.run()
            return gm.get_output(0)
    # The pool size: TVM_NUM_THREADS is read when the pool starts; set it explicitly as well.
    try:
        tvm.get_global_func("runtime.config_threadpool")(1, args.threads)
    except Exception:  # noqa: BLE001 - older or newer builds name it differently
        pass
    out = call()
    while isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "ADT", "Tuple"):
        out = out[0]
    out = out.numpy()
    mn, med, n = time_runs(call, args.warmup, args.reps, args.max_seconds)
    return dict(variant=f"tvm {tvm.__version__} mcpu={getattr(target, 'mcpu', '?')}", compile_ms=compile_ms, min_ms=mn,
                median_ms=med, reps=n, rel_error=rel_error(np.asarray(out), ref))


RUNTIMES = {"ort": run_ort, "torch": run_torch, "tvm": run_tvm}
MODULES = {"ort": "onnxruntime", "torch": "torch", "tvm": "tvm"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runtime", required=True, choices=list(RUNTIMES) + ["list"])
    ap.add_argument("--models-dir")
    ap.add_argument("--model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-seconds", type=float, default=10.0)
    args = ap.parse_args()
    if args.runtime == "list":
        import importlib
        avail = {}
        for r, m in MODULES.items():
            try:
                importlib.import_module(m)
                avail[r] = True
            except Exception as e:  # noqa: BLE001 - report whatever fails to import
                avail[r] = f"{type(e).__name__}: {e}"
        print(json.dumps(avail))
        return 0
    if not args.models_dir or not args.model:
        ap.error("--models-dir and --model are required")
    # The thread count must be set before the runtime's pools start.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")  # see the tvm case below
    try:
        import numpy as np
        x = np.load(os.path.join(args.models_dir, args.model + ".input.npy"))
        ref = np.load(os.path.join(args.models_dir, args.model + ".ref.npy"))
        if args.runtime == "tvm":
            # TVM does not need torch; when it can import it, tvm.relax tries (for ~30 s, and
            # fails with Debian's torch) to JIT-compile a DLPack extension for it at import.
            sys.modules["torch"] = None
        __import__(MODULES[args.runtime])
        rss_import = status_kb("VmRSS:")
        result = RUNTIMES[args.runtime](args, x, ref)
    except Exception as e:  # noqa: BLE001 - reported to the benchmark, which goes on
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"runtime": args.runtime, "error": f"{type(e).__name__}: {e}"}))
        return 3
    result.update(runtime=args.runtime, rss_after_import_kb=rss_import,
                  peak_rss_kb=status_kb("VmHWM:"))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
