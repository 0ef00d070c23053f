#!/usr/bin/env bash
# Sourced by head.sh and worker.sh. node_ip: this node's address for Ray, printed: the first IPv4 address of
# NETWORK_INTERFACE when it is set (exits 2 naming the interfaces there are when it has none), else the first
# address of `hostname -I`.
node_ip() {
    local address
    if [ -n "${NETWORK_INTERFACE:-}" ]; then
        address=$(ip -4 -o addr show dev "$NETWORK_INTERFACE" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n 1)
        if [ -z "$address" ]; then
            echo "NETWORK_INTERFACE=$NETWORK_INTERFACE has no IPv4 address on $(hostname); its interfaces:" \
                 "$(ip -4 -o addr show 2>/dev/null | awk '{printf "%s (%s) ", $2, $4}')" >&2
            exit 2
        fi
    else
        address=$(hostname -I | awk '{print $1}')
    fi
    printf '%s\n' "$address"
}
