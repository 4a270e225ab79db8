#!/usr/bin/env python3
"""Apache TVM's MetaSchedule, tuned for a wall-clock budget, as the anchor of Kiln's auto-tuner.

    TVM_FFI_DISABLE_TORCH_C_DLPACK=1 nice -n 10 .venv-bench/bin/python bench/tvm_metaschedule.py \
        --model build/models/dqn.onnx --input-npy build/models/dqn.input.npy \
        --minutes 3 --threads 1 --work-dir /tmp/ms-dqn [--max-trials-per-task K]

Imports the ONNX model with TVM's Relax ONNX frontend (as bench/baselines.py does: static input
shape, weights as constants, DecomposeOpsForInference), builds it untuned, tunes it with
MetaSchedule (tvm.s_tir.meta_schedule: extract_tasks, gradient task scheduler, evolutionary
search, XGBoost cost model, local builder and runner) for the target
{"kind": "llvm", "mcpu": <host cpu>, "num-cores": N}, compiles it with the tuning database
(compile_relax) and times the tuned and the untuned module in the same process, with
bench/baselines.py's protocol (warm-up calls, then up to --reps timed calls; min and median).

The budget rule. MetaSchedule stops on trial counts, not time, so the count is made large
(--max-trials-global, default 100000: never the binding limit at these budgets) and time stops
it: the deadline is M minutes after tuning begins (task extraction, the tune contexts, the
builder and runner pools, the searches, builds and measurements all count against it; the untuned
build before it and the final compile_relax and timing after it do not: they are reported apart,
as compile_s). The builder enforces it: it sees every batch (also in the gradient
scheduler's first round, one batch per task, where no measure callback runs yet) and, once the
deadline has passed, builds no more: it joins the batches being measured (so that their records
reach the database through the default callbacks) and ends the tuning with an exception, caught
here. (Terminating the tasks from a measure callback instead is unsafe: the gradient scheduler
joins a task after choosing it, and returning a terminated task fails its check.)
Tuning thus overshoots the deadline by at most one batch's evolutionary search plus the
measurement of batches in flight (tune_wall_s in the output is the time actually spent). The
batch is --trials-per-iter 16 rather than MetaSchedule's 64: with 2 cores and a few minutes, 64
per batch would not reach every task once.

Two work-arounds for the PyPI build of TVM 0.27 (see docs/tvm-baseline.md): torch is hidden from
the builder/runner worker processes (importing tvm.relax there tries to JIT a torch extension,
30 s or more), and the builder's build function is MetaSchedule's default_build minus its
`import tvm.s_tir.tensor_intrin` (build_candidate below).

Correctness: the tuned output must agree with the untuned TVM build within a relative error of
1e-4 (max|a - b| / max|b|), and with the reference output (the --input-npy file with
.input.npy replaced by .ref.npy, or --ref-npy) when there is one; otherwise the JSON line carries
"error" and the exit status is 4.

Prints one JSON line: model, minutes, tune_wall_s, total_wall_s, trials (candidates measured),
trials_ok, tasks, tasks_tuned, stopped_by, cost_model, tuned_/untuned_ median_ms and min_ms,
speedup (untuned median / tuned median), rel errors. If the xgboost package cannot be imported,
the cost model falls back to MetaSchedule's "random" model and "cost_model" says so.
Benchmark only: Kiln itself never runs Python.
"""
import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the .onnx file")
    ap.add_argument("--input-npy", help="the input; without it a seeded random normal input")
    ap.add_argument("--ref-npy", help="reference output (default: beside --input-npy)")
    ap.add_argument("--minutes", type=float, required=True, help="tuning budget, wall clock")
    ap.add_argument("--threads", type=int, default=1, help="num-cores of the target and "
                    "TVM_NUM_THREADS of the measurements")
    ap.add_argument("--work-dir", required=True, help="MetaSchedule's database and logs")
    ap.add_argument("--max-trials-per-task", type=int, default=None)
    ap.add_argument("--max-trials-global", type=int, default=100000)
    ap.add_argument("--trials-per-iter", type=int, default=16)
    ap.add_argument("--cost-model", choices=["xgb", "random"], default="xgb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--max-seconds", type=float, default=60.0,
                    help="stop timing one module after this many seconds (at least 3 runs)")
    return ap.parse_args()


def build_candidate(mod, target, _params):
    """MetaSchedule's default_build (builder/local_builder.py) without its
    `import tvm.s_tir.tensor_intrin`: that import parses some 250 TVMScript intrinsics, ~20 s per
    fresh worker here, and the LocalBuilder starts fresh workers for every batch, so under its
    30 s timeout most builds failed on a loaded machine. The LLVM default schedule rules use no
    tensor intrinsics, so the built code is the same. Runs in the builder's worker processes
    (pickled by value by cloudpickle), hence the local imports."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def log(msg):
    print(f"tvm_metaschedule.py: {msg}", file=sys.stderr, flush=True)


def first_tensor(out):
    while isinstance(out, (list, tuple)) or type(out).__name__ in ("Array", "ADT", "Tuple"):
        out = out[0]
    return out.numpy()


def main():
    args = parse_args()
    if args.minutes <= 0 or args.threads <= 0:
        print("tvm_metaschedule.py: --minutes and --threads must be positive", file=sys.stderr)
        return 2
    # Thread counts must be in the environment before TVM's pool (and the runner's worker
    # processes, which inherit it) start.
    os.environ["TVM_NUM_THREADS"] = str(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")
    sys.modules["torch"] = None  # as baselines.py: keeps tvm's import from JIT-ing a torch ext
    # The builder's and runner's worker processes (python -m tvm.exec.popen_worker) import
    # tvm.relax too, whose base_py_module tries that JIT (30 s or more, and it fails with
    # Debian's torch) whenever torch imports, which runs past the 30 s build timeout and fails
    # every build. Hide torch from them with a package that refuses to import.
    import atexit
    import shutil
    import tempfile
    stub = tempfile.mkdtemp(prefix="tvm_ms_no_torch_")
    atexit.register(shutil.rmtree, stub, True)
    os.makedirs(os.path.join(stub, "torch"))
    with open(os.path.join(stub, "torch", "__init__.py"), "w") as f:
        f.write('raise ImportError("torch is hidden from TVM\'s workers by tvm_metaschedule.py")\n')
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [stub] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    sys.path.insert(0, HERE)
    import baselines  # the timing protocol and the error measure of the other baselines

    result = {"model": os.path.splitext(os.path.basename(args.model))[0],
              "minutes": args.minutes, "threads": args.threads}
    # MetaSchedule's loggers write to sys.stdout as it is when they are made: point it at
    # stderr meanwhile, so that stdout holds the JSON line only.
    stdout, sys.stdout = sys.stdout, sys.stderr
    status = 0
    try:
        result.update(run(args, baselines))
        status = 4 if "error" in result else 0
    except Exception as e:  # noqa: BLE001 - one JSON line whatever happens
        traceback.print_exc(file=sys.stderr)
        result["error"] = f"{type(e).__name__}: {e}"
        status = 3
    finally:
        sys.stdout = stdout
    print(json.dumps(result), flush=True)
    return status


def run(args, baselines):
    import numpy as np
    import onnx
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx
    import tvm.s_tir.meta_schedule as ms
    from tvm.ir.utils import derived_object

    t_begin = time.perf_counter()
    db_files = [os.path.join(args.work_dir, f)
                for f in ("database_workload.json", "database_tuning_record.json")]
    if any(os.path.exists(f) and os.path.getsize(f) > 0 for f in db_files):
        raise RuntimeError(f"{args.work_dir} already holds a tuning database; a budgeted run "
                           "starts from an empty one (give another --work-dir)")
    os.makedirs(args.work_dir, exist_ok=True)

    # The model and its input, as baselines.run_tvm loads them.
    model = onnx.load(args.model)
    inp = model.graph.input[0]
    if args.input_npy:
        x = np.load(args.input_npy)
    else:
        dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        if not all(d > 0 for d in dims):
            raise RuntimeError(f"input {inp.name} has a dynamic shape {dims}: give --input-npy")
        x = np.random.default_rng(args.seed).standard_normal(dims).astype(np.float32)
    ref_path = args.ref_npy
    if not ref_path and args.input_npy and args.input_npy.endswith(".input.npy"):
        cand = args.input_npy[: -len(".input.npy")] + ".ref.npy"
        ref_path = cand if os.path.exists(cand) else None
    ref = np.load(ref_path) if ref_path else None

    host = tvm.target.Target.from_device(tvm.cpu())
    tconf = {"kind": "llvm", "mcpu": str(host.attrs.get("mcpu", "native")),
             "num-cores": args.threads}
    if host.attrs.get("mtriple"):
        tconf["mtriple"] = str(host.attrs["mtriple"])
    target = tvm.target.Target(tconf)

    mod = from_onnx(model, shape_dict={inp.name: list(x.shape)}, keep_params_in_input=False)
    mod = relax.transform.DecomposeOpsForInference()(mod)

    # Untuned: the build baselines.py times (default schedules), for the same target.
    log("building the untuned module")
    t0 = time.perf_counter()
    ex_untuned = tvm.compile(mod, target=target)
    untuned_compile_s = time.perf_counter() - t0

    # Cost model: XGBoost when the package imports, else MetaSchedule's random model.
    cost_model = args.cost_model
    cost_model_note = cost_model
    if cost_model == "xgb":
        try:
            import xgboost
            cost_model_note = f"xgb (xgboost {xgboost.__version__})"
        except Exception as e:  # noqa: BLE001 - any import failure means no XGBoost
            cost_model = "random"
            cost_model_note = f"random (xgboost unavailable: {type(e).__name__}: {e})"
            log(cost_model_note)

    # Tuning, stopped by the deadline (see the budget rule above).
    t_tune = time.perf_counter()
    deadline = t_tune + args.minutes * 60.0
    state = {"trials": 0, "trials_ok": 0, "stopped_by": None, "batches": 0, "build_errors": 0,
             "first_build_error": None, "deadline_raised": False}

    @derived_object
    class CountTrials(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results):
            state["batches"] += 1
            state["trials"] += len(runner_results)
            state["trials_ok"] += sum(1 for r in runner_results if r.error_msg is None)
            for b in builder_results:
                if b.error_msg is not None:
                    state["build_errors"] += 1
                    if state["first_build_error"] is None:
                        state["first_build_error"] = str(b.error_msg)[-2000:]
                        log(f"first build error: {state['first_build_error']}")

    class DeadlineReached(Exception):
        pass

    @derived_object
    class DeadlineBuilder(ms.builder.PyBuilder):
        """The local builder, which ends the tuning once the deadline has passed: during the
        gradient scheduler's first round (one batch per task, before any measure callback
        runs) this is the only place that sees every batch."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def build(self, build_inputs):
            if time.perf_counter() < deadline:
                return self.inner.build(build_inputs)
            state["stopped_by"] = "deadline"
            # Join the batches already built and being measured (their results go to the
            # database through the default callbacks), then end the tuning: the exception comes
            # back out of tune_tasks. The batch of this call (built yet: no builder_results) is
            # dropped.
            for i, rec in enumerate(scheduler.tasks_):
                if (not rec.is_terminated and rec.measure_candidates is not None and
                        rec.builder_results is not None):
                    scheduler.join_running_task(i)
            state["deadline_raised"] = True
            raise DeadlineReached()

    from tvm.s_tir.meta_schedule.relax_integration import (extract_tasks,
                                                           extracted_tasks_to_tune_contexts)
    # Tasks are the fused PrimFuncs of the default CPU pipeline's legalization (LegalizeOps,
    # FoldConstant, FuseOps, FuseTIR); compile_relax repeats that preparation on `mod`, so the
    # database keys match.
    with target:
        fused = tvm.transform.Sequential(
            relax.backend.cpu_generic.library_dispatch_passes(target) +
            relax.backend.cpu_generic.legalize_passes(target))(mod)
    log("extracting tasks")
    tasks = extract_tasks(fused, target)
    log(f"{len(tasks)} tasks extracted")
    contexts, weights = extracted_tasks_to_tune_contexts(tasks, work_dir=args.work_dir,
                                                         seed=args.seed)
    log(f"tuning {len(contexts)} tasks for {args.minutes} min, target {target}")
    # The database is made here so that it outlives a tuning ended by DeadlineReached (every
    # measured record is committed to it, and to its files, as it comes).
    database = ms.Database.create("json", work_dir=args.work_dir, module_equality="structural")
    builder = DeadlineBuilder(ms.builder.LocalBuilder(f_build=build_candidate,
                                                      max_workers=contexts[0].num_threads))
    scheduler = ms.TaskScheduler.create("gradient")
    try:
        ms.tune_tasks(
            tasks=contexts, task_weights=weights, work_dir=args.work_dir,
            max_trials_global=args.max_trials_global,
            max_trials_per_task=args.max_trials_per_task,
            num_trials_per_iter=args.trials_per_iter,
            builder=builder, database=database, cost_model=cost_model, task_scheduler=scheduler,
            measure_callbacks=ms.MeasureCallback.create("default") + [CountTrials()])
    except Exception as e:  # noqa: BLE001 - DeadlineReached comes back through TVM's FFI
        if not state["deadline_raised"]:
            raise
        log(f"deadline reached in the scheduler's first round ({type(e).__name__})")
    tune_wall_s = time.perf_counter() - t_tune
    if state["stopped_by"] is None:
        state["stopped_by"] = "trial limits or search exhausted"
    # Tasks with at least one successfully measured schedule (those compile_relax will use).
    tasks_tuned = sum(1 for c in contexts
                      if database.query_tuning_record(c.mod, target, c.task_name) is not None)

    log(f"tuning stopped after {tune_wall_s:.0f} s ({state['stopped_by']}); compiling")
    t0 = time.perf_counter()
    ex_tuned = ms.relax_integration.compile_relax(database, mod, target, params=None)
    tuned_compile_s = time.perf_counter() - t0

    # Timing: both modules in this process, the pool at --threads.
    try:
        tvm.get_global_func("runtime.config_threadpool")(1, args.threads)
    except Exception:  # noqa: BLE001 - as baselines.py
        pass
    dev = tvm.cpu()
    arr = tvm.runtime.tensor(x) if hasattr(tvm.runtime, "tensor") else tvm.nd.array(x)
    vm_u = relax.VirtualMachine(ex_untuned, dev)
    vm_t = relax.VirtualMachine(ex_tuned, dev)
    out_u = first_tensor(vm_u["main"](arr))
    out_t = first_tensor(vm_t["main"](arr))
    umin, umed, un = baselines.time_runs(lambda: vm_u["main"](arr), args.warmup, args.reps,
                                         args.max_seconds)
    tmin, tmed, tn = baselines.time_runs(lambda: vm_t["main"](arr), args.warmup, args.reps,
                                         args.max_seconds)

    res = dict(
        target=str(target), tvm=tvm.__version__, cost_model=cost_model_note,
        tune_wall_s=round(tune_wall_s, 1), total_wall_s=None,
        trials=state["trials"], trials_ok=state["trials_ok"], batches=state["batches"],
        build_errors=state["build_errors"], db_records=len(database.get_all_tuning_records()),
        trials_per_iter=args.trials_per_iter, tasks=len(contexts), tasks_tuned=tasks_tuned,
        stopped_by=state["stopped_by"],
        compile_s=dict(untuned=round(untuned_compile_s, 1), tuned=round(tuned_compile_s, 1)),
        tuned_median_ms=tmed, tuned_min_ms=tmin, tuned_reps=tn,
        untuned_median_ms=umed, untuned_min_ms=umin, untuned_reps=un,
        speedup=umed / tmed if tmed > 0 else None,
        rel_error_tuned_vs_untuned=baselines.rel_error(out_t, out_u))
    if state["first_build_error"]:
        res["first_build_error"] = state["first_build_error"][-500:]
    errors = []
    if res["rel_error_tuned_vs_untuned"] > 1e-4:
        errors.append(f"tuned output differs from the untuned build: rel error "
                      f"{res['rel_error_tuned_vs_untuned']:.3g} > 1e-4")
    if ref is not None:
        res["rel_error_tuned_vs_ref"] = baselines.rel_error(out_t, ref)
        res["rel_error_untuned_vs_ref"] = baselines.rel_error(out_u, ref)
        if res["rel_error_tuned_vs_ref"] > 1e-4:
            errors.append(f"tuned output differs from {ref_path}: rel error "
                          f"{res['rel_error_tuned_vs_ref']:.3g} > 1e-4")
    if errors:
        res["error"] = "; ".join(errors)
    res["total_wall_s"] = round(time.perf_counter() - t_begin, 1)
    return res


if __name__ == "__main__":
    sys.exit(main())
