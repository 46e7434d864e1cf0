#!/usr/bin/env python3
"""trainer-run against transformers' own model on the same torch, training the same Llama folder.

A random Llama of about 22 M parameters (hidden 512, 6 layers, 8 heads with 4 key/value
heads, MLP 1376, vocabulary 4096, untied), made by transformers' save_pretrained, trained for
next-token prediction on the same random ids at block 256, microbatch 8, 2 microbatches an
update, AdamW, on the CPU with the same thread count, one run after the other, interleaved
per precision and repeated:
  - transformers: AutoModelForCausalLM.from_pretrained(folder) in eager PyTorch (no
    torch.compile; its default attention, sdpa), torch.optim.AdamW, bf16 by
    torch.autocast("cpu"); tokens/s from the median update time after the first 2;
  - trainer-run: the same folder as model.kind hf with a fixed plan (no checkpointing); its
    finish event's tokens_per_second (updates after the first 2).
Prints one JSON document with every run, the medians and the ratios; not a test
(docs/benchmarks.md). Run it with the Python of scripts/install-hf-python.sh.

usage: bench/transformers_compare.py [--trainer-run PATH] [--precisions fp32,bf16]
                                     [--updates N] [--repeats K] [--threads T]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from nanogpt_compare import cpu_name

CONFIG = {"hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
          "num_key_value_heads": 4, "intermediate_size": 1376, "vocab_size": 4096,
          "max_position_embeddings": 256, "tie_word_embeddings": False}
BLOCK, MICROBATCH, ACCUMULATION = 256, 8, 2


def make_model_and_data(work):
    import numpy
    import torch
    import transformers
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**CONFIG))
    model.save_pretrained(os.path.join(work, "model"))
    ids = numpy.random.default_rng(0).integers(0, CONFIG["vocab_size"], 400_000, numpy.uint16)
    ids.tofile(os.path.join(work, "train.bin"))
    ids[:20_000].tofile(os.path.join(work, "val.bin"))
    return sum(p.numel() for p in model.parameters())


def train_transformers(work, precision, updates, threads):
    """One run in this process: the median seconds of an update after the first 2."""
    import numpy
    import torch
    import transformers
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = transformers.AutoModelForCausalLM.from_pretrained(os.path.join(work, "model"))
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.from_numpy(numpy.fromfile(os.path.join(work, "train.bin"), numpy.uint16)
                           .astype(numpy.int64))
    starts = torch.randint(0, ids.numel() - BLOCK - 1, (updates * ACCUMULATION, MICROBATCH))
    seconds = []
    for update in range(updates):
        began = time.perf_counter()
        for micro in range(ACCUMULATION):
            batch = torch.stack([ids[s:s + BLOCK] for s in starts[update * ACCUMULATION + micro]])
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = model(input_ids=batch, labels=batch).loss / ACCUMULATION
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds[2:])


def run_transformers(args, work, precision):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--train-transformers",
                          work, "--precisions", precision, "--updates", str(args.updates),
                          "--threads", str(args.threads)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"transformers failed ({out.returncode}): {out.stderr[-2000:]}")
    seconds = float(out.stdout.strip().splitlines()[-1])
    return {"tokens_per_second": MICROBATCH * ACCUMULATION * BLOCK / seconds}


def run_trainer(args, work, precision):
    job = os.path.join(work, f"job-{precision}.yaml")
    with open(job, "w") as f:
        f.write(f"model: {{kind: hf, path: {work}/model, block_size: {BLOCK}}}\n"
                f"data: {{format: tokens, train: {work}/train.bin, eval: [{work}/val.bin]}}\n"
                f"optimizer: {{lr: 0.001}}\n"
                f"training: {{effective_batch: {MICROBATCH * ACCUMULATION}, "
                f"updates: {args.updates}, seed: 1, eval_interval: 100000, "
                f"checkpoint_interval: 100000}}\n"
                f"plan: {{microbatch: {MICROBATCH}, precision: {precision}}}\n"
                f"runtime: {{threads: {args.threads}}}\n"
                f"memory: {{budget: 16GiB}}\n")
    out = subprocess.run([args.trainer_run, "--config", job, "--json", "--output-dir",
                          tempfile.mkdtemp(dir=work)], capture_output=True, text=True, check=False)
    finish = [json.loads(line) for line in out.stdout.splitlines() if '"finish"' in line]
    if out.returncode != 0 or not finish:
        sys.exit(f"trainer-run failed ({out.returncode}): {out.stderr[-2000:]}")
    return {"tokens_per_second": finish[-1]["tokens_per_second"], "mfu": finish[-1].get("mfu")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer-run", default="build/bin/trainer-run")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--train-transformers", metavar="WORK", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.updates < 4:
        sys.exit("--updates: at least 4 (the first 2 are warm-up)")
    if args.train_transformers:
        print(train_transformers(args.train_transformers, args.precisions, args.updates,
                                 args.threads))
        return
    import torch
    import transformers
    work = tempfile.mkdtemp(prefix="transformers-compare.")
    try:
        parameters = make_model_and_data(work)
        runs = {p: {"transformers": [], "trainer_run": []} for p in args.precisions.split(",")}
        for _ in range(args.repeats):
            for precision, both in runs.items():
                both["transformers"].append(run_transformers(args, work, precision))
                both["trainer_run"].append(run_trainer(args, work, precision))
        result = {"torch": torch.__version__, "transformers": transformers.__version__,
                  "parameters": parameters, "config": CONFIG, "block": BLOCK,
                  "microbatch": MICROBATCH, "accumulation": ACCUMULATION,
                  "updates": args.updates, "threads": args.threads, "cpu": cpu_name(),
                  "precisions": {}}
        for precision, both in runs.items():
            ours = statistics.median(r["tokens_per_second"] for r in both["trainer_run"])
            theirs = statistics.median(r["tokens_per_second"] for r in both["transformers"])
            result["precisions"][precision] = {
                "trainer_run_tokens_per_second": ours,
                "transformers_tokens_per_second": theirs, "ratio": ours / theirs, "runs": both}
        json.dump(result, sys.stdout, indent=1)
        print()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
