#!/usr/bin/env bash
# NFR-002 and issue 4: llmr-node depends on neither Python nor the NVIDIA libraries at link time
# (ldd shows no python, libcuda or libnvidia-ml: NVML is dlopened), and it runs, registers and reports
# "no GPU" with nothing on PATH (so no python can be found) on this GPU-less machine. A router without
# --allow-cpu-nodes refuses it (403, NFR-001): the node logs the router's reason and keeps retrying.
source "$(dirname "$0")/node_lib.sh"
need_bins
command -v ldd >/dev/null || skip "ldd is not installed"
ldd "$BIN/llmr-node" >"$T/ldd.txt" 2>&1 || fail "ldd failed: $(cat "$T/ldd.txt")"
if grep -Ei 'python|libcuda|libnvidia|libcudart|libcublas' "$T/ldd.txt"; then fail "llmr-node links the libraries above"; fi
ok "ldd: no python, libcuda, libnvidia-ml ($(wc -l <"$T/ldd.txt") libraries)"

setup_engines
mkdir -p "$T/hub" "$T/emptybin"
start_hub

# A production router (no --allow-cpu-nodes) refuses the GPU-less node, saying why.
"$BIN/llmr-router" --listen 127.0.0.1:0 --data-dir "$T/strict" --hub-endpoint "http://127.0.0.1:$HUB_PORT" \
  --insecure-no-auth >"$T/router.log" 2>&1 &
STRICT_PID=$!; PIDS+=($STRICT_PID)
wait_for 30 router_listening || fail "llmr-router did not start"
ROUTER="http://127.0.0.1:$(router_port_from_log)"
start_node
wait_for 15 grep -q "registration failed.*HTTP 403" "$T/node.log" || fail "no 403 from the router without --allow-cpu-nodes"
kill -0 "$NODE_PID" || fail "the refused node exited"
ok "refused without --allow-cpu-nodes, kept running: $(grep -o 'HTTP 403: .*' "$T/node.log" | head -1 | cut -c1-160)"
stop_pid "$NODE_PID"; stop_pid "$STRICT_PID"
rm -rf "$T/node"

start_router
: >"$T/node.log"
PATH="$T/emptybin" "$BIN/llmr-node" --router "$ROUTER" --listen 127.0.0.1:0 --gpu auto --models-dir "$T/node/models" \
  --state-dir "$T/node/state" --engines-dir "$ENGINES" >>"$T/node.log" 2>&1 &
NODE_PID=$!; PIDS+=($NODE_PID)
wait_for 15 grep -q "registered with" "$T/node.log" || fail "the node did not register with an empty PATH"
grep -q "no GPU" "$T/node.log" || fail "the node did not say it runs without a GPU"
! grep -qi python "/proc/$NODE_PID/maps" || fail "a python library is mapped into the node"
! grep -Eqi 'libcuda|libnvidia' "/proc/$NODE_PID/maps" || fail "an NVIDIA library is mapped into the node on a GPU-less host"
ok "runs with PATH=$T/emptybin, registers, says: $(grep -o 'no GPU: [^(]*' "$T/node.log" | head -1)"
"$BIN/llmr-node" --help >/dev/null || fail "--help failed"
echo PASS
