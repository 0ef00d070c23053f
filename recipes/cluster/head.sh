#!/usr/bin/env bash
# Start the Ray head node of a GDPO training cluster (run it on the head machine).
#
#   bash recipes/cluster/head.sh                 # then worker.sh on every other node, then submit.sh
#   HEAD_IP=10.0.0.1 NUM_GPUS=8 bash recipes/cluster/head.sh --block    # extra arguments go to `ray start`
#
# Ray 2.60 clusters use token authentication: the head writes its token to ~/.ray/auth_token (or
# $RAY_AUTH_TOKEN_PATH). Workers and job clients need the same token: a shared home directory does it,
# otherwise copy the file or export RAY_AUTH_TOKEN=<its content> on them.
set -euo pipefail

# The address Ray uses on this node: HEAD_IP, else the first IPv4 address of NETWORK_INTERFACE (e.g. ib0, eth1),
# else the first address of `hostname -I` (on a node with several networks, name the one the nodes share)
source "$(dirname "${BASH_SOURCE[0]}")/node_ip.sh"
HEAD_IP=${HEAD_IP:-$(node_ip)}
RAY_PORT=${RAY_PORT:-6379}
DASHBOARD_HOST=${DASHBOARD_HOST:-0.0.0.0}   # where `ray job submit` reaches the cluster
DASHBOARD_PORT=${DASHBOARD_PORT:-8265}
NUM_CPUS=${NUM_CPUS:-}                      # empty: Ray counts them
NUM_GPUS=${NUM_GPUS:-}                      # empty: Ray counts them
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}

if [ "${RAY_AUTH_MODE}" = token ] && [ -z "${RAY_AUTH_TOKEN:-}" ]; then
    ray get-auth-token --generate > /dev/null   # creates the token file if there is none yet
    echo "Ray token: ${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/auth_token} (workers and job clients need it)"
fi

ray start --head \
    --node-ip-address="${HEAD_IP}" \
    --port="${RAY_PORT}" \
    --dashboard-host="${DASHBOARD_HOST}" \
    --dashboard-port="${DASHBOARD_PORT}" \
    --include-dashboard=true \
    --disable-usage-stats \
    ${NUM_CPUS:+--num-cpus="${NUM_CPUS}"} \
    ${NUM_GPUS:+--num-gpus="${NUM_GPUS}"} \
    "$@"

echo "workers join with:  HEAD_ADDRESS=${HEAD_IP}:${RAY_PORT} bash recipes/cluster/worker.sh"
echo "submit jobs with:   RAY_ADDRESS=http://${HEAD_IP}:${DASHBOARD_PORT} bash recipes/cluster/submit.sh RECIPE"
