#!/usr/bin/env bash
# Readiness check without a scheduler: run this script once on every node, with that node's
# rank. Node 0 hosts the rendezvous and prints the whole report; the others print their part.
#
# Usage:    jobs/by-hand/run-on-each-node.sh NODE_RANK
# Example:  on gpu-a: jobs/by-hand/run-on-each-node.sh 0
#           on gpu-b: jobs/by-hand/run-on-each-node.sh 1
set -euo pipefail

NODE_RANK=${1:?usage: $0 NODE_RANK (0 on the node that hosts the rendezvous)}
NODES=2                          # EDIT: number of nodes
ENDPOINT=gpu-a:29500             # EDIT: node 0's address as the others reach it, and a free port
RUN_ID=ddpcheck-$(date +%Y%m%d)  # EDIT: any id, the same on every node
# export GLOO_SOCKET_IFNAME=eth0 # EDIT: the interface between nodes, if not the default

exec ddpcheck run --nodes "$NODES" --node-rank "$NODE_RANK" --rdzv-endpoint "$ENDPOINT" \
    --rdzv-id "$RUN_ID" --json "ddpcheck-$(hostname -s).json"
