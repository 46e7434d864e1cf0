# The tiny job of tiny_job.h as YAML, for the shell tests: a 2-block GPT of width 32 over two
# licence texts every Debian machine ships (package base-files). Too small to beat the release
# gate's simple baseline: daemon configs of these tests set regression: {beat_baseline: false}.
#   tiny_job_yaml EFFECTIVE_BATCH UPDATES INTERVAL [MORE_YAML...]
# INTERVAL is both the eval and the checkpoint interval; each MORE_YAML is one more top-level
# line (plan:, memory:).
tiny_job_yaml() {
  local licences=/usr/share/common-licenses
  printf '%s\n' \
    "model: {kind: gpt, n_layer: 2, n_head: 2, n_embd: 32, block_size: 32}" \
    "data:" \
    "  files: [$licences/GPL-3, $licences/Apache-2.0]" \
    "  eval_windows_per_slice: 4" \
    "optimizer: {lr: 0.003}" \
    "schedule: {warmup_updates: 3, min_lr: 0.0003}" \
    "training: {effective_batch: $1, updates: $2, seed: 7, eval_interval: $3, checkpoint_interval: $3}" \
    "runtime: {threads: 1}" \
    "${@:4}"
}
