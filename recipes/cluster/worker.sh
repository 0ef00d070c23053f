#!/usr/bin/env bash
# Join a worker node to the Ray cluster started by head.sh (run it on every other node).
#
#   HEAD_ADDRESS=10.0.0.1:6379 bash recipes/cluster/worker.sh            # extra arguments go to `ray start`
#
# The node needs the head's token (~/.ray/auth_token, or RAY_AUTH_TOKEN) and the same Python environment
# as the head, with verl and gdpo-verl installed: verl loads the plugin in every process it starts.
set -euo pipefail

HEAD_ADDRESS=${HEAD_ADDRESS:?set HEAD_ADDRESS to the head node address IP:PORT, e.g. 10.0.0.1:6379}
# The address Ray uses on this node: NODE_IP, else the first IPv4 address of NETWORK_INTERFACE (e.g. ib0, eth1),
# else the first address of `hostname -I` (on a node with several networks, name the one the nodes share)
source "$(dirname "${BASH_SOURCE[0]}")/node_ip.sh"
NODE_IP=${NODE_IP:-$(node_ip)}
NUM_CPUS=${NUM_CPUS:-}
NUM_GPUS=${NUM_GPUS:-}
export RAY_AUTH_MODE=${RAY_AUTH_MODE:-token}

ray start \
    --address="${HEAD_ADDRESS}" \
    --node-ip-address="${NODE_IP}" \
    --disable-usage-stats \
    ${NUM_CPUS:+--num-cpus="${NUM_CPUS}"} \
    ${NUM_GPUS:+--num-gpus="${NUM_GPUS}"} \
    "$@"
