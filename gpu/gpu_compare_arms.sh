#!/usr/bin/env bash
# SEAL against vanilla GRPO on a GPU node: the learning recipe's SFT start, then both arms x the seeds asked, each run
# a launch with its own environment service, as many at once as CONCURRENT, in the background so that the shell
# (an SSH session, a scheduler's job step) may end while it runs; re-running resumes; then the comparison
# (scripts/compare_runs.py).
#   bash gpu/gpu_compare_arms.sh start MODEL_DIR [SEED ...]   # in the background (setsid nohup); returns at once
#   bash gpu/gpu_compare_arms.sh run MODEL_DIR [SEED ...]     # the same in the foreground
#   bash gpu/gpu_compare_arms.sh status                       # each run: done, failed, running (its step), to do
#   bash gpu/gpu_compare_arms.sh wait [S]                     # until the driver ends or S s (540) pass; status
#   bash gpu/gpu_compare_arms.sh report [DIR]                 # compare_runs.py of every run with metrics
#   bash gpu/gpu_compare_arms.sh pack FILE                    # results without checkpoints, one .tar.gz
#   bash gpu/gpu_compare_arms.sh pack-sft DIR                 # the SFT start as DIR/sft.tar.NN parts of 15 MiB
#   bash gpu/gpu_compare_arms.sh stop                         # end the background driver and its launches
# MODEL_DIR: SmolLM2-135M-Instruct (`python scripts/make_smoke_model.py smollm2 DIR`). SEEDS default: 1 2 3.
# The SFT start (exp/sft_learn.yaml -> experiments/sft_learn) is trained once and reused, or SFT_MODEL names its
# Hugging Face folder brought from an earlier machine (`pack-sft`, then `cat sft.tar.* | tar -x -C DIR`), so every
# seed of every sitting starts from the same weights. Then, per seed, SEAL (exp/learn_seal.yaml) and vanilla
# (exp/learn_vanilla.yaml) from it, `seed=S`, into experiments/learn_<arm>_s<S>;
# a run with trained.json is done and skipped; one cut short resumes from its last checkpoint (every 8 steps).
# GPUS (default 1): with more, the SFT start trains on all of them (its batch split across them), then each seed's
# two arms run on the GPU that held the fewest launches when the first of them started (CUDA_VISIBLE_DEVICES,
# counted within the one the node sets), so a node of two GPUs trains two seeds' pairs at once, and no GPU ever
# holds more than n = ceil(CONCURRENT / GPUS) launches. CONCURRENT (default 2 x GPUS: each seed's two arms
# together) launches run at once; vLLM's gpu_memory_utilization is sized for the n launches of a GPU:
# min(0.3, (74 GB / n - 6 GB) / 80 GB), 6 GB being a run's actor, contexts and slack; MEMORY_SHARE sets it
# instead (0.25 leaves room for gpu/gpu_ood_eval.sh at GPU_MEMORY=0.15, started after the arms' first step:
# an engine starting beside two others starting found no memory for its KV cache). Each engine's KV cache is
# set outright to its share less 4 GiB (vLLM's kv_cache_memory_bytes), so that no engine sizes it by measuring
# the GPU while a neighbour allocates or frees memory (verl puts an engine to sleep as soon as it has started).
# State and logs: experiments/arms/ (driver.log, <run>.log, <run>.exit).
# Time on one H100 (2026-11-25, kit installed in 3 min): SFT 75 steps in 5.3 min (6.5 with its start-up); a
# SEAL launch 64 tasks x 8x8 took ~9 min to its first step (start-up and greedy val on 100 tasks) and 41-48 s a
# step with gpu/gpu_ood_eval.sh beside it: the kit, SFT and one seed's pair (24 steps, val after) take about
# 35 minutes, longer than a short node allocation: train and `pack-sft` the SFT start once, and start later
# allocations from it (SFT_MODEL). `pack FILE` into storage that outlives the node before it is released. On one H200 node
# (2026-11-26), four launches at once (two seeds' pairs) stepped in 42-52 s, their first step ~8 min after the
# launch; six went over the node's RAM. On a node of 4 H200s (64 cores, 503 GiB), GPUS=4 CONCURRENT=6 ran all
# six runs at once (5 workers of each kind a launch): ready to fit in 4.2 min, 24.7 s a step, each run done in
# 15 min. CONCURRENT launches must fit the node's RAM at 24 GiB each (NODE_GIB
# overrides the size read from /proc/meminfo), else start and run refuse in one line. Each launch gets its share
# of verl's agent-loop, reward-loop and storage workers: 8 x GPUS / CONCURRENT of each, at least 2 (WORKERS).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_mode_cli.sh"
mode=$1
shift
gpus=${GPUS:-1}
concurrent=${CONCURRENT:-$((2 * gpus))}
per_gpu=$(((concurrent + gpus - 1) / gpus))  # the most launches one GPU holds at once
cd "$(dirname "$0")/.."
state=experiments/arms
arms=(seal vanilla)

sft_model() {  # the Hugging Face folder of the SFT start (SFT_MODEL, or its latest checkpoint); exit 1 when none
  if [ -n "${SFT_MODEL:-}" ]; then
    [ -f "$SFT_MODEL/config.json" ] && echo "$SFT_MODEL" && return
    echo "gpu_compare_arms.sh: SFT_MODEL=$SFT_MODEL holds no config.json (a Hugging Face model folder)" >&2
    return 1
  fi
  "$py" -c 'from seal.trainer.experiment import compose_experiment; from seal.trainer.launch.sft import sft_model_path
print(sft_model_path(compose_experiment("exp/sft_learn.yaml")))' 2>/dev/null
}

launch_host_gib=24  # one launch's host memory (its Ray workers, vLLM, the environment service): measured on one
                    # H200 node (125.9 GiB), four at once held 90 GiB and six went over Ray's 95% line at start-up

refuse_beyond_host() {  # exit 2 with one line when CONCURRENT launches need more host memory than the node has
  local node need fit
  node=${NODE_GIB:-$(awk '/^MemTotal:/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)}
  read -r need fit < <(awk -v n="$concurrent" -v node="$node" -v per="$launch_host_gib" \
    'BEGIN { line = 0.95 * node; printf "%d %d\n", (n * per > line ? n * per : 0), int(line / per) }')
  [ "$need" -eq 0 ] || { echo "gpu_compare_arms.sh: CONCURRENT=$concurrent launches need about $need GiB of host" \
    "memory ($launch_host_gib each); this node's $node GiB holds $fit below Ray's 95% line (NODE_GIB overrides" \
    "the node's size)" >&2; exit 2; }
}

memory_share() {
  if [ -n "${MEMORY_SHARE:-}" ]; then echo "$MEMORY_SHARE"; return; fi
  awk -v n="$per_gpu" 'BEGIN { u = (74 / n - 6) / 80; if (u > 0.3) u = 0.3; printf "%.2f", u }'
}

kv_cache_bytes() {  # the KV cache of one engine: its share of an 80 GB GPU less 4 GiB (weights, graphs, slack)
  local mib
  mib=$(awk -v u="$(memory_share)" 'BEGIN { g = u * 80 - 4; if (g < 2) g = 2; printf "%d", g * 1024 }')
  echo $((mib * 1048576))
}

workers() {  # verl's agent-loop, reward-loop and TransferQueue storage workers of one launch: 8 of each by
  # default, sized for a node of its own; launches sharing a node take their share (at least 2), since four
  # launches' worker processes kept a 16-core H200 node at a load average of 20-23. WORKERS sets it.
  if [ -n "${WORKERS:-}" ]; then echo "$WORKERS"; return; fi
  awk -v n="$concurrent" -v g="$gpus" 'BEGIN { w = int(8 * g / n); if (w < 2) w = 2; if (w > 8) w = 8; print w }'
}

runs_of() { for seed in "$@"; do for arm in "${arms[@]}"; do echo "learn_${arm}_s${seed}"; done; done; }

train_run() {  # train_run NAME SFT_MODEL GPU: one launch on that GPU, logged; its exit status into <run>.exit
  local name=$1 arm seed
  arm=${name#learn_}; arm=${arm%_s*}; seed=${name##*_s}
  local devices=(${CUDA_VISIBLE_DEVICES:-})
  devices=(${devices[*]//,/ })
  [ "$gpus" -le 1 ] || export CUDA_VISIBLE_DEVICES=${devices[$3]:-$3}
  "$py" launcher.py --conf "exp/learn_${arm}.yaml" --with-bfcl -- actor_rollout_ref.model.path="$2" \
    seed="$seed" actor_rollout_ref.rollout.gpu_memory_utilization="$(memory_share)" \
    +actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes="$(kv_cache_bytes)" \
    actor_rollout_ref.rollout.agent.num_workers="$(workers)" reward.num_workers="$(workers)" \
    transfer_queue.backend.SimpleStorage.num_data_storage_units="$(workers)" > "$state/$name.log" 2>&1
  echo $? > "$state/$name.exit"
}

forget_ended() { local pid; for pid in "${!gpu_of[@]}"; do kill -0 "$pid" 2>/dev/null || unset "gpu_of[$pid]"; done; }

launches_on() { local pid n=0; for pid in "${!gpu_of[@]}"; do [ "${gpu_of[$pid]}" != "$1" ] || n=$((n + 1)); done; echo $n; }

least_busy_gpu() { local g best=0; for ((g = 1; g < gpus; g++)); do
  [ "$(launches_on $g)" -ge "$(launches_on $best)" ] || best=$g; done; echo $best; }

drive() {  # drive MODEL_DIR SEED...: the SFT start when missing, then every run not done yet, CONCURRENT at a time
  local model=$1 status=0 name sft
  shift
  mkdir -p "$state"
  echo $$ > "$state/driver.pid"
  local sft_gpus=()  # the SFT start's 16 rows a step spread over every GPU: the same batch, sooner
  [ "$gpus" -le 1 ] || sft_gpus=("trainer.n_gpus_per_node=$gpus")
  echo "$@" > "$state/seeds"
  if ! sft=$(sft_model); then
    [ -z "${SFT_MODEL:-}" ] || return 2
    echo "sft: training the SFT start (experiments/sft_learn; log $state/sft_learn.log)"
    "$py" launcher.py --conf exp/sft_learn.yaml -- model.path="$model" "${sft_gpus[@]}" > "$state/sft_learn.log" 2>&1
    sft=$(sft_model) || { echo "gpu_compare_arms.sh: the SFT start failed ($state/sft_learn.log)" >&2; return 1; }
  fi
  echo "sft: $sft"
  local seeds=("$@") seed gpu
  local -A gpu_of=()  # each running launch's pid -> its GPU (memory_share sized every GPU for per_gpu launches)
  for seed in "${seeds[@]}"; do
    gpu=""  # a seed's two arms share the GPU that had the fewest launches when its first one started
    for name in $(runs_of "$seed"); do
      if [ -f "experiments/$name/trained.json" ]; then echo "$name: done already"; continue; fi
      while :; do
        forget_ended
        [ -n "$gpu" ] || [ ${#gpu_of[@]} -ge "$concurrent" ] || gpu=$(least_busy_gpu)
        [ -n "$gpu" ] && [ ${#gpu_of[@]} -lt "$concurrent" ] && [ "$(launches_on "$gpu")" -lt "$per_gpu" ] && break
        wait -n
      done
      rm -f "$state/$name.exit"
      echo "$name: started on GPU $gpu (gpu_memory_utilization $(memory_share), $(workers) workers of each kind;" \
        "log $state/$name.log)"
      train_run "$name" "$sft" "$gpu" &
      gpu_of[$!]=$gpu
    done
  done
  wait
  for name in $(runs_of "$@"); do
    [ -f "experiments/$name/trained.json" ] || { echo "$name: not done ($state/$name.log)" >&2; status=1; }
  done
  report
  return $status
}

driver_alive() { [ -f "$state/driver.pid" ] && kill -0 "$(cat "$state/driver.pid")" 2>/dev/null; }

status() {  # one line per run of the seeds asked last: done / failed / running at step N / to do
  [ -f "$state/seeds" ] || { echo "nothing started yet ($state/seeds is missing)"; return 0; }
  driver_alive && echo "driver: running (pid $(cat "$state/driver.pid"), log $state/driver.log)" \
    || echo "driver: not running (start again to resume)"
  for name in $(runs_of $(cat "$state/seeds")); do
    local step
    step=$("$py" -c 'import sys; from pathlib import Path; from seal.reports.compare import read_steps
print(len(read_steps(Path(sys.argv[1]))))' "experiments/$name" 2>/dev/null || echo 0)
    if [ -f "experiments/$name/trained.json" ]; then echo "$name: done ($step steps)"
    elif [ -f "$state/$name.exit" ]; then echo "$name: failed, exit $(cat "$state/$name.exit") ($state/$name.log)"
    elif [ -f "$state/$name.log" ] && driver_alive; then echo "$name: running, $step steps done"
    elif [ -f "$state/$name.log" ]; then echo "$name: interrupted after $step steps (start again to resume)"
    else echo "$name: to do"; fi
  done
}

follow() {  # follow LIMIT: return when the driver has ended or LIMIT seconds have passed, then the status
  local limit=$1 began=$SECONDS poll=${WAIT_POLL:-20}
  while driver_alive && [ $((SECONDS - began + poll)) -le "$limit" ]; do sleep "$poll"; done
  driver_alive && echo "after $((SECONDS - began)) s the driver still runs: wait again" \
    || echo "after $((SECONDS - began)) s the driver has ended"
  status
}

report() {  # compare_runs.py of every learning run that has metrics
  local runs=() run
  for run in experiments/learn_*_s*; do [ -d "$run/metrics" ] && runs+=("$run"); done
  [ ${#runs[@]} -gt 0 ] || { echo "gpu_compare_arms.sh: no run has metrics yet" >&2; return 1; }
  "$py" scripts/compare_runs.py "${runs[@]}" --out "${1:-experiments/comparison}"
}

case "$mode" in
  start)
    [ $# -ge 1 ] || { echo "gpu_compare_arms.sh: start MODEL_DIR [SEED ...]" >&2; exit 2; }
    refuse_beyond_host
    if driver_alive; then echo "already running (pid $(cat "$state/driver.pid")): see status"; exit 0; fi
    mkdir -p "$state"
    setsid nohup bash "${BASH_SOURCE[0]}" run "$@" > "$state/driver.log" 2>&1 < /dev/null &
    echo "started in the background: bash gpu/gpu_compare_arms.sh status (log $state/driver.log)" ;;
  run)
    [ $# -ge 1 ] || { echo "gpu_compare_arms.sh: run MODEL_DIR [SEED ...]" >&2; exit 2; }
    refuse_beyond_host
    model=$1
    shift
    if [ $# -eq 0 ]; then set -- 1 2 3; fi
    drive "$model" "$@" ;;
  status) status ;;
  wait)
    [[ "${1:-540}" =~ ^[0-9]+$ ]] || { echo "gpu_compare_arms.sh: wait [SECONDS], a whole number" >&2; exit 2; }
    follow "${1:-540}" ;;
  report) report "$@" ;;
  pack)
    [ $# -eq 1 ] || { echo "gpu_compare_arms.sh: pack FILE" >&2; exit 2; }
    names=(experiments/arms experiments/comparison experiments/sft_learn experiments/learn_*_s* \
      launcher_record/sft_learn launcher_record/learn_*_s*)
    present=()
    for name in "${names[@]}"; do [ -e "$name" ] && present+=("$name"); done
    tar -czf "$1" --exclude='*/checkpoints' --exclude='*.parquet' --exclude='*/hydra' "${present[@]}" \
      && echo "packed $(du -h "$1" | cut -f1) into $1 (untar it in the project root, then: report)" ;;
  pack-sft)
    [ $# -eq 1 ] || { echo "gpu_compare_arms.sh: pack-sft DIR" >&2; exit 2; }
    sft=$(sft_model) || { echo "gpu_compare_arms.sh: no SFT start to pack (run first)" >&2; exit 1; }
    mkdir -p "$1" && tar -cf - -C "$sft" . | split -b 15m -d -a 2 - "$1/sft.tar." \
      && echo "packed $sft into $(ls "$1"/sft.tar.?? | wc -l) parts in $1" ;;
  stop)
    if driver_alive; then
      pid=$(cat "$state/driver.pid")
      [ "$(ps -o pgid= -p "$pid" | tr -d ' ')" = "$pid" ] && kill -- -"$pid" || kill "$pid"
      echo "stopped the driver (pid $pid) and what it started"
    else echo "no driver running"; fi ;;
  *) echo "gpu_compare_arms.sh: no mode '$mode' (start run status wait report pack pack-sft stop; --help)" >&2; exit 2 ;;
esac
