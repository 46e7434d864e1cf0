#!/usr/bin/env python3
"""trainer-run against karpathy/nanoGPT's own train.py at the same shape, side by side.

Both train GPT 4 x 4 x 256 (block 256, dropout 0.1, no biases, vocabulary 256) on the same
byte tokens (the licence texts of base-files, written as nanoGPT's train.bin/val.bin/meta.pkl),
batch 16 x 4 accumulation, AdamW, on the CPU with the same thread count, one run after the
other, interleaved per precision and repeated. nanoGPT's train.py runs unmodified, eager
(--compile=False unless --compile), from a copy of its checkout whose data/ holds the files;
trainer-run trains a job written for the same files with a fixed plan. tokens/s:
nanoGPT: 16 x 4 x 256 tokens over each iteration's printed time, the median of iterations
3 onward (its own timer, one iteration behind the loss); trainer-run: its finish event's
tokens_per_second (updates after the first 2, device synchronised). Prints one JSON document
with every run, the medians and the ratios; not a test (docs/benchmarks.md).

Note: nanoGPT's train.py autocasts only on CUDA (its ctx is nullcontext() on the CPU), so its
--dtype=bfloat16 trains in fp32 on a CPU; the driver runs it as asked and says so.

usage: bench/nanogpt_compare.py --nanogpt DIR [--python PY] [--trainer-run PATH]
                                [--precisions fp32,bf16] [--iterations N] [--repeats K]
                                [--threads T] [--compile]
"""
import argparse
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

LICENCES = ["Apache-2.0", "Artistic", "GFDL-1.3", "GPL-2", "GPL-3", "LGPL-2.1", "MPL-2.0"]
SHAPE = {"n_layer": 4, "n_head": 4, "n_embd": 256, "block_size": 256, "dropout": 0.1}
BATCH, ACCUMULATION = 16, 4
NANOGPT_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def write_data(folder):
    """nanoGPT's data/<name>/ files: byte ids as uint16, the last tenth held out."""
    data = b"".join(open(f"/usr/share/common-licenses/{n}", "rb").read() for n in LICENCES)
    cut = len(data) * 9 // 10
    os.makedirs(folder, exist_ok=True)
    for name, part in (("train.bin", data[:cut]), ("val.bin", data[cut:])):
        with open(os.path.join(folder, name), "wb") as f:
            for byte in part:
                f.write(byte.to_bytes(2, "little"))
    with open(os.path.join(folder, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": 256}, f)


def trainer_job(path, data, precision, iterations, threads):
    with open(path, "w") as f:
        f.write(
            f"model: {{kind: gpt, vocab_size: 256, n_layer: {SHAPE['n_layer']}, "
            f"n_head: {SHAPE['n_head']}, n_embd: {SHAPE['n_embd']}, "
            f"block_size: {SHAPE['block_size']}, dropout: {SHAPE['dropout']}, bias: false}}\n"
            f"data: {{format: tokens, dtype: uint16, train: {data}/train.bin, "
            f"eval: [{data}/val.bin]}}\n"
            f"training: {{effective_batch: {BATCH * ACCUMULATION}, updates: {iterations}, "
            f"seed: 1337, eval_interval: 100000, checkpoint_interval: 100000}}\n"
            f"plan: {{microbatch: {BATCH}, precision: {precision}}}\n"
            f"runtime: {{threads: {threads}}}\n"
            f"memory: {{budget: 16GiB}}\n")


def run_trainer(args, work, precision):
    job = os.path.join(work, f"job-{precision}.yaml")
    trainer_job(job, os.path.join(work, "nanogpt", "data", "trainerd"), precision,
                args.iterations, args.threads)
    out = subprocess.run([args.trainer_run, "--config", job, "--json", "--output-dir",
                          tempfile.mkdtemp(dir=work)],
                         capture_output=True, text=True, check=False)
    finish = [json.loads(l) for l in out.stdout.splitlines() if '"finish"' in l]
    if out.returncode != 0 or not finish:
        sys.exit(f"trainer-run failed ({out.returncode}): {out.stderr[-2000:]}")
    f = finish[-1]
    return {"tokens_per_second": f["tokens_per_second"], "mfu": f.get("mfu"),
            "device_info": f.get("device_info")}


def run_nanogpt(args, work, precision):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    argv = [args.python, "train.py", "--dataset=trainerd", "--device=cpu",
            f"--compile={args.compile}", f"--dtype={NANOGPT_DTYPE[precision]}",
            f"--batch_size={BATCH}", f"--gradient_accumulation_steps={ACCUMULATION}",
            f"--max_iters={args.iterations}", "--eval_interval=100000", "--eval_iters=1",
            "--log_interval=1", "--always_save_checkpoint=False", "--bias=False",
            "--out_dir=" + os.path.join(work, "nanogpt-out")]
    argv += [f"--{k}={v}" for k, v in SHAPE.items()]
    argv += ["--warmup_iters=2", f"--lr_decay_iters={args.iterations}"]
    # torch.set_num_threads is not called by train.py: OMP_NUM_THREADS sets its threads.
    out = subprocess.run(argv, cwd=os.path.join(work, "nanogpt"), env=env,
                         capture_output=True, text=True, check=False)
    times = [float(m.group(2)) for m in
             re.finditer(r"^iter (\d+): loss [^,]+, time ([0-9.]+)ms", out.stdout, re.M)
             if int(m.group(1)) >= 3]
    if out.returncode != 0 or not times:
        sys.exit(f"nanoGPT failed ({out.returncode}): {out.stderr[-2000:]}")
    tokens = BATCH * ACCUMULATION * SHAPE["block_size"]
    return {"tokens_per_second": tokens / (statistics.median(times) / 1000),
            "iterations_timed": len(times)}


def git_commit(folder):
    out = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=False)
    return out.stdout.strip() if out.returncode == 0 else "unknown (not a git checkout)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nanogpt", required=True, help="a checkout of karpathy/nanoGPT")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python whose torch nanoGPT runs on (default: this one)")
    parser.add_argument("--trainer-run", default="build/bin/trainer-run")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true",
                        help="nanoGPT under torch.compile (its default; torch 2.x only)")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.nanogpt, "train.py")):
        sys.exit(f"{args.nanogpt}: no train.py: not a nanoGPT checkout")
    if args.iterations < 5:
        sys.exit("--iterations: at least 5 (the first 3 are warm-up)")
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True, check=True).stdout.strip()
    work = tempfile.mkdtemp(prefix="nanogpt-compare.")
    try:
        shutil.copytree(args.nanogpt, os.path.join(work, "nanogpt"),
                        ignore=shutil.ignore_patterns(".git", "data"))
        write_data(os.path.join(work, "nanogpt", "data", "trainerd"))
        runs = {p: {"nanogpt": [], "trainer_run": []} for p in args.precisions.split(",")}
        for _ in range(args.repeats):
            for precision, both in runs.items():
                both["nanogpt"].append(run_nanogpt(args, work, precision))
                both["trainer_run"].append(run_trainer(args, work, precision))
        result = {"nanogpt_commit": git_commit(args.nanogpt), "nanogpt_torch": torch_version,
                  "nanogpt_compile": args.compile, "threads": args.threads,
                  "shape": dict(SHAPE, batch=BATCH, accumulation=ACCUMULATION),
                  "iterations": args.iterations, "cpu": cpu_name(),
                  "note": "nanoGPT's train.py autocasts only on CUDA: its bf16/fp16 runs "
                          "compute in fp32 on a CPU", "precisions": {}}
        for precision, both in runs.items():
            ours = statistics.median(r["tokens_per_second"] for r in both["trainer_run"])
            theirs = statistics.median(r["tokens_per_second"] for r in both["nanogpt"])
            result["precisions"][precision] = {
                "trainer_run_tokens_per_second": ours, "nanogpt_tokens_per_second": theirs,
                "ratio": ours / theirs, "runs": both}
        json.dump(result, sys.stdout, indent=1)
        print()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
