#!/usr/bin/env bash
# verl's main_ppo on a CPU machine, under gdpo_verl/cpu_run/supervise.py, with gdpo-verl's packaged config: the CPU
# platform for verl (gdpo_verl/verl_adapter/for_cpu_run/cpu_platform.py) and the settings every CPU run needs
# (docs/cpu-training.md says why each is there). The task — model, data, rewards, estimator, batch sizes — comes as
# hydra overrides after the script name; they are applied after the CPU settings, so they can change any of them.
#
#   CPU_TRAINING_PYTHON=exe  the environment's interpreter (default $CPU_TRAINING_VENV/bin/python, where
#                            CPU_TRAINING_VENV defaults to .venv-cpu-training)
#   OUT=dir                  required: everything the run writes goes here: run.log (its whole output), metrics.jsonl
#                            (verl's file logger, which a trainer.logger override keeps), checkpoints/, tensorboard/
#                            (with trainer.logger=[...,tensorboard]) and hydra/ (the composed config, .hydra/config.yaml)
#   STEPS=n                  training steps (default 2); the checkpoint is saved after the last
#   START_STEP=k             a run resuming from its step-k checkpoint (default 0): the supervisor counts from k
#   STALL_TIMEOUT=s          stop the run when for s seconds no step finishes and its processes are idle (default
#                            300; start-up and the first step take about 2 minutes on 2 cores, a later step seconds;
#                            on a busy machine longer, and a working step is never stopped by this)
#   STEP_TIMEOUT=s           stop the run when one step (the first with the start-up) takes s seconds, working or
#                            not (default 3600)
#   VERBOSE=1                the run's whole output on the terminal too (it always goes to OUT/run.log); by default
#                            the terminal gets the start-up's phases, a line when it was silent for 15 s, one line per
#                            step, and a failure's cause (gdpo_verl/cpu_run/narrate.py)
#   LABEL=text               put before each of those lines (several runs at once: the learning study)
#   TRAINER=name             which of verl's trainers, through its own entry point (default sync):
#                              sync, colocate_async, separate_async  verl's V1 trainer (trainer.v1.trainer_mode), main_ppo
#                              legacy                                verl's legacy trainer (trainer.use_v1=false), main_ppo
#                              one_step_off                          verl.experimental.one_step_off_policy.main_ppo
#                              fully_async                           verl.experimental.fully_async_policy.fully_async_main
#                            The trainers with rollout apart from training (separate_async, one_step_off, fully_async)
#                            get a second placeholder "GPU" for their rollout server and sync weights over TCP
#                            (gdpo_verl/verl_adapter/for_cpu_run/cpu_checkpoint_engine.py: verl has no checkpoint
#                            engine for CPUs).
#                            fully_async trains (prompts in the data x STEPS) / ppo_mini_batch_size steps (STEPS with
#                            the CPU run's 8 prompts and mini-batch of 8), and sets trainer.test_freq=STEPS+1.
#   CONFIG=name              main_ppo's config (the trainers through main_ppo): gdpo (default), gdpo-verl's packaged
#                            config; verl, verl's own ppo_trainer.yaml, where the GDPO keys come with + (the README's
#                            second route)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${CPU_TRAINING_PYTHON:-${CPU_TRAINING_VENV:-$ROOT/.venv-cpu-training}/bin/python}
: "${OUT:?set OUT to the folder for the outputs of the run}"
STEPS=${STEPS:-2}
STALL_TIMEOUT=${STALL_TIMEOUT:-300}
STEP_TIMEOUT=${STEP_TIMEOUT:-3600}

if [ ! -x "$PYTHON" ]; then
    echo "cpu_main_ppo.sh: no interpreter at $PYTHON; create the environment with" \
         "bash scripts/setup_cpu_training_env.sh (or set CPU_TRAINING_PYTHON)." >&2
    exit 2
fi

# gdpo-verl from this checkout, whatever the environment has installed (Ray's workers get the driver's path,
# vLLM's processes the environment); the CPU platform for verl, loaded by verl itself in every process of the run.
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export VERL_USE_EXTERNAL_MODULES=gdpo_verl.verl_adapter.for_cpu_run.cpu_platform VERL_PLATFORM=cpu
# verl registers its FSDP engine for cuda/npu; this picks it, and it runs on the platform's device ("cpu").
export VERL_ENGINE_DEVICE=cuda
export VERL_FILE_LOGGER_PATH="$OUT/metrics.jsonl"
# verl's tensorboard logger writes to tensorboard_log/<project>/<experiment> under the working directory without it
export TENSORBOARD_DIR="$OUT/tensorboard"
export TOKENIZERS_PARALLELISM=false
# vLLM's KV cache on the CPU: 1 GiB (vLLM's CPU build reads it in GiB). Without it vLLM gives the cache
# rollout.gpu_memory_utilization of the machine's memory less what its own process holds, about 1 GiB, which on a
# small machine leaves nothing and vLLM refuses to start.
export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
unset RAY_ADDRESS
# Ray starts its workers, and so every actor of the run and vLLM's engine under them, at nice 15: beside other work of
# the same session (a busy process started from the same shell) they got about 3% of a core and the start-up took
# hours. At 0 they take their share of the machine like any other process.
export RAY_worker_niceness=0
# No torch.compile in any process of the run: verl's FSDP engine compiles its entropy function
# (actor_rollout_ref.*.fsdp_config.use_torch_compile, default true) and vLLM's CPU sampler its random sampling
# (compiled_random_sample), both with inductor, which builds C++ with the machine's compiler against Python's headers:
# a toolchain the run would need, about 14 CPU-seconds the first time on a machine, and seconds of tracing in every
# run. Without it they run as plain torch.
export TORCH_COMPILE_DISABLE=1

CPU=(
    data.dataloader_num_workers=0 data.filter_overlong_prompts_workers=1
    # one reward worker (verl starts 8, which compete for the cores during start-up)
    reward.num_workers=1
    # actor: FSDP2 (FSDP1 asks for an accelerator device), SDPA attention, no torch.compile (nor anywhere else in the
    # run: TORCH_COMPILE_DISABLE above)
    +actor_rollout_ref.model.override_config.attn_implementation=sdpa
    actor_rollout_ref.actor.strategy=fsdp2
    actor_rollout_ref.actor.use_torch_compile=False
    # rollout: vLLM's CPU build, eager, no sleep mode (CUDA only), a small share of memory for the KV cache
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.tensor_model_parallel_size=1
    actor_rollout_ref.rollout.gpu_memory_utilization=0.1
    actor_rollout_ref.rollout.enforce_eager=True
    actor_rollout_ref.rollout.free_cache_engine=False +actor_rollout_ref.rollout.enable_sleep_mode=False
    actor_rollout_ref.rollout.agent.num_workers=1
    # one placeholder "GPU" (verl's resource pools ask Ray for GPUs); a fresh local Ray (address=local: never a
    # cluster already running on this machine)
    trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.device=cpu
    # as many epochs as steps: verl stops at whichever ends first, and an epoch is at least one step
    "trainer.total_training_steps=$STEPS" "trainer.total_epochs=$STEPS" "trainer.save_freq=$STEPS"
    trainer.resume_mode=disable
    trainer.val_before_train=False trainer.test_freq=-1
    "trainer.default_local_dir=$OUT/checkpoints"
    "trainer.logger=[console,file]"
    # hydra writes the composed config (which check_run reads) and its own log here, not under the working directory
    "hydra.run.dir=$OUT/hydra"
    transfer_queue.backend.SimpleStorage.num_data_storage_units=1
    +ray_kwargs.ray_init.address=local +ray_kwargs.ray_init.num_cpus=8 +ray_kwargs.ray_init.num_gpus=1
    +ray_kwargs.ray_init.include_dashboard=False
)
# Which trainer: its entry point, its config and what it needs on a CPU. main_ppo takes gdpo-verl's packaged config
# (verl's ppo_trainer.yaml with the GDPO settings); verl's experimental trainers keep their own and take the GDPO
# settings on top (+gdpo=settings).
TRAINER=${TRAINER:-sync}
LAST=()  # settings a trainer requires, after the task's
case "${CONFIG:-gdpo}" in
    gdpo) MAIN_PPO=(-m verl.trainer.main_ppo --config-path pkg://gdpo_verl.config --config-name gdpo_trainer) ;;
    verl) MAIN_PPO=(-m verl.trainer.main_ppo) ;;
    *) echo "cpu_main_ppo.sh: CONFIG must be gdpo or verl; got '$CONFIG'" >&2; exit 2 ;;
esac
# rollout on a server of its own: a second placeholder "GPU", and weights synced over TCP
CPU_ENGINE=gdpo_verl.verl_adapter.for_cpu_run.cpu_checkpoint_engine
SEPARATE=(ray_kwargs.ray_init.num_gpus=2
          actor_rollout_ref.rollout.checkpoint_engine.backend=cpu_tcp
          actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=$CPU_ENGINE)
case "$TRAINER" in
    sync|colocate_async)
        ENTRY=("${MAIN_PPO[@]}") MODE=("trainer.v1.trainer_mode=$TRAINER") ;;
    separate_async)
        # one training step per weight sync: the batch is one PPO mini-batch (verl's assert: train_batch_size ==
        # parameter_sync_step * ppo_mini_batch_size)
        ENTRY=("${MAIN_PPO[@]}")
        MODE=(trainer.v1.trainer_mode=separate_async "${SEPARATE[@]}" actor_rollout_ref.rollout.nnodes=1
              actor_rollout_ref.rollout.n_gpus_per_node=1 trainer.v1.separate_async.parameter_sync_step=1) ;;
    legacy)
        ENTRY=("${MAIN_PPO[@]}") MODE=(trainer.use_v1=false) ;;
    one_step_off|fully_async)
        if [ "${CONFIG:-gdpo}" != gdpo ]; then
            echo "cpu_main_ppo.sh: TRAINER=$TRAINER takes verl's config for that trainer, with the GDPO settings on" \
                 "top; CONFIG=$CONFIG is for the trainers through main_ppo" >&2
            exit 2
        fi
        if [ "$TRAINER" = one_step_off ]; then
            ENTRY=(-m verl.experimental.one_step_off_policy.main_ppo)
        else
            ENTRY=(-m verl.experimental.fully_async_policy.fully_async_main)
            # the rollouter takes one prompt at a time and the trainer a PPO mini-batch of prompts from its queue
            # (verl's asserts: data.train_batch_size=0, data.gen_batch_size=1), after the task's batch size; one
            # training step per weight sync, as many steps as the dataset's prompts over STEPS epochs make
            # verl's trainer here logs a step's training metrics with the next weight sync, and the last step's only
            # when the last weight version is no multiple of trainer.test_freq (-1 divides every number)
            LAST=(data.train_batch_size=0 data.gen_batch_size=1 async_training.trigger_parameter_sync_step=1
                  rollout.total_rollout_steps=null "trainer.test_freq=$((STEPS + 1))")
        fi
        # their configs search verl's trainer configs at a path relative to verl's repository: here, by package,
        # with gdpo-verl's settings.
        # Their actors ask Ray for 10 CPUs each (fully_async: its trainer and rollouter too; logical CPUs: Ray does
        # not hold a process to them).
        MODE=("hydra.searchpath=[pkg://verl.trainer.config,pkg://gdpo_verl.config]" +gdpo=settings "${SEPARATE[@]}"
              ray_kwargs.ray_init.num_cpus=32 actor_rollout_ref.hybrid_engine=False
              rollout.nnodes=1 rollout.n_gpus_per_node=1) ;;
    *)
        echo "cpu_main_ppo.sh: TRAINER must be sync, colocate_async, separate_async, legacy, one_step_off or" \
             "fully_async; got '$TRAINER'" >&2
        exit 2 ;;
esac

# The run's verdict reads verl's file logger: a trainer.logger of the user's keeps it (said once, on the terminal)
OVERRIDES=()
for argument in "$@"; do
    case "$argument" in
        trainer.logger=* | +trainer.logger=* | ++trainer.logger=*)
            loggers=${argument#*=}
            loggers=${loggers#[}
            loggers=${loggers%]}
            case ",$loggers," in
                *,file,*) ;;
                *) argument="${argument%%=*}=[${loggers:+$loggers,}file]"
                   echo "cpu_main_ppo.sh: $argument (the CPU run's verdict reads verl's file logger, OUT/metrics.jsonl)" ;;
            esac ;;
    esac
    OVERRIDES+=("$argument")
done
set -- ${OVERRIDES[@]+"${OVERRIDES[@]}"}

SUPERVISE=(--log "$OUT/run.log" --metrics "$VERL_FILE_LOGGER_PATH" --steps "$STEPS" --stall-timeout "$STALL_TIMEOUT"
           --step-timeout "$STEP_TIMEOUT" --start-step "${START_STEP:-0}" --label "${LABEL:-}")
if [ "${VERBOSE:-0}" = 1 ]; then
    SUPERVISE+=(--verbose)
elif [ -n "${VERBOSE:-}" ] && [ "$VERBOSE" != 0 ]; then
    echo "cpu_main_ppo.sh: VERBOSE must be 1 (the run's whole output on the terminal) or 0; got '$VERBOSE'" >&2
    exit 2
fi
exec "$PYTHON" -m gdpo_verl.cpu_run.supervise "${SUPERVISE[@]}" -- "$PYTHON" "${ENTRY[@]}" "${CPU[@]}" \
    "${MODE[@]}" "$@" ${LAST[@]+"${LAST[@]}"}
