# Sourced by the sbatch scripts beside it (bash): what a cohort launcher needs to know about its place
# in a SLURM job, derived from SLURM's own environment.
#   MACHINE_RANK  this task's machine: SLURM_PROCID (the scripts run one task a node, so it equals
#                 SLURM_NODEID; two tasks of a one-node job can stand in for two nodes)
#   MAIN_HOST     the job's first node (`scontrol show hostnames $SLURM_JOB_NODELIST`), where task 0
#                 runs member 0 and its label store
#   MAIN_ADDR     that node's address as SLURM knows it (NodeAddr), else its host name
#   PORT_BASE     20000 + (SLURM_JOB_ID mod 1000) x 20: the cohort's label store listens there and
#                 member i's vLLM weight-sync group on PORT_BASE + 1 + i, so two jobs sharing a node
#                 do not collide (1,000 consecutive jobs get disjoint ranges of 20 ports)
# cohort_ports N  prints the --set arguments that put the store and N members' weight-sync groups there
# keep_update CONFIG PROCESSES  prints the accumulation that keeps CONFIG's update on PROCESSES processes
: "${SLURM_JOB_ID:?not inside a SLURM job (SLURM_JOB_ID is unset): submit with sbatch}"
: "${SLURM_JOB_NODELIST:?SLURM_JOB_NODELIST is unset}"
MACHINE_RANK="${SLURM_PROCID:-${SLURM_NODEID:-0}}"
MAIN_HOST="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
MAIN_ADDR="$(scontrol show node "$MAIN_HOST" 2>/dev/null | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2 || true)"
MAIN_ADDR="${MAIN_ADDR:-$MAIN_HOST}"
PORT_BASE=$((20000 + SLURM_JOB_ID % 1000 * 20))
export MACHINE_RANK MAIN_HOST MAIN_ADDR PORT_BASE

cohort_ports() {
    local i
    echo "--set distributed.host=$MAIN_ADDR --set distributed.port=$PORT_BASE"
    for ((i = 0; i < $1; i++)); do
        echo "--set members.$i.trainer.vllm_group_port=$((PORT_BASE + 1 + i))"
    done
}

# keep_update CONFIG PROCESSES: the gradient_accumulation_steps that keeps CONFIG's update (member 0's
# completions an optimizer step: per_device_train_batch_size x num_processes x accumulation) on a
# member world of PROCESSES processes, so a recipe moved onto other GPUs learns as shipped
keep_update() {
    "${PYTHON:-python3}" - "$1" "$2" <<'PY'
import sys

import yaml

path, processes = sys.argv[1], int(sys.argv[2])
cfg = yaml.safe_load(open(path))
member = cfg["members"][0]
trainer = {**cfg.get("trainer", {}), **member.get("trainer", {})}
if "per_device_train_batch_size" not in trainer:
    sys.exit(f"{path}: set trainer.per_device_train_batch_size (the update is counted from it)")
per_device = trainer["per_device_train_batch_size"]
update = per_device * member.get("num_processes", 1) * trainer.get("gradient_accumulation_steps", 1)
if update % (per_device * processes):
    sys.exit(f"{path}: its update of {update} completions does not split over {processes} processes x {per_device}")
print(update // (per_device * processes))
PY
}
