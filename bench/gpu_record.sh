#!/bin/bash
# What ran on a lent GPU machine (the `device` tool): the environment, every command
# ddpcheck's preflight runs there (through recording shims), tests/gpu, `ddpcheck run` as
# README says, and ddpcheck run against faults injected on purpose. Everything lands in
# $OUT: session.log (all output) and rec.tar.gz (raw tool outputs, reports, JSON).
#
# Usage (on the GPU machine, in the repository root): OUT=/some/dir bash bench/gpu_record.sh
# SECTIONS (default "readme tests faults explain launches nodes") picks what runs after the install; explain
# records bench/real_runs_gpu.py's real failed GPU jobs under $OUT/rec/runs-gpu.
# Needs a CUDA torch with pytest, pytest-timeout, psutil and tabulate already installed.
set -u
OUT=${OUT:?set OUT to a directory}
R=$OUT/rec
mkdir -p "$R/raw" "$R/reports"
exec > >(tee "$OUT/session.log") 2>&1
pack() { tar -czf "$OUT/rec.tar.gz" -C "$R" . 2>/dev/null; }
step() { pack; echo; echo "=== $* ($(date +%T), ${SECONDS}s)"; }
BUDGET_S=${BUDGET_S:-520}  # the device tool's 10-minute call, less the packing
left() { [ $((BUDGET_S - SECONDS)) -gt "$1" ] || { echo "(skipped: under $1 s left)"; false; }; }
PY=${PY:-python3}

step environment
nvidia-smi
$PY - <<'EOF'
import sys, torch
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)
print("nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "-", "gpus", torch.cuda.device_count(),
      [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
EOF
nproc; free -g | head -2; df -h /dev/shm /tmp | tail -2; ip -o -4 addr

step "install: pip install . (torch already there, nothing fetched)"
rm -rf build
$PY -m pip install -q --no-deps --no-build-isolation --no-index . \
  || { echo "pip install . failed: running from the checkout"; export PYTHONPATH=$PWD; }
$PY -m ddpcheck --help | head -3

# Shims record each command ddpcheck runs (argv, exit code, output) and pass it through.
SHIMS=$R/shims
mkdir -p "$SHIMS"
for tool in nvidia-smi dmesg journalctl systemctl ip; do
  real=$(command -v $tool) || continue
  cat > "$SHIMS/$tool" <<EOF
#!/bin/bash
f=$R/raw/$tool-\$(date +%s%N)
"$real" "\$@" >\$f.out 2>\$f.err; rc=\$?
echo "\$*" >\$f.argv; echo \$rc >\$f.rc
cat \$f.out; cat \$f.err >&2; exit \$rc
EOF
  chmod +x "$SHIMS/$tool"
done
export PATH=$SHIMS:$PATH

run() {  # run NAME TIMEOUT [VAR=value...] [-- ddpcheck run args...]
  local name=$1 limit=$2 vars=(); shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  step "ddpcheck run: $name ${vars[*]} $*"
  left "$limit" || return 0
  env "${vars[@]}" timeout -k 5 "$limit" $PY -m ddpcheck run --json "$R/reports/$name.json" \
      --junitxml "$R/reports/$name.xml" "$@" 2>&1 | tee "$R/reports/$name.txt"
  echo "exit ${PIPESTATUS[0]}"
}
SECTIONS=${SECTIONS:-readme tests faults explain launches nodes}
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

if want readme; then
# README's first command on this node (auto: one NCCL rank per GPU)
run readme 180 PYTHONUNBUFFERED=1 -- --results-dir "$R/results-readme"
run readme-verbose 150 NCCL_DEBUG=INFO -- -v
mv "$R/raw" "$R/raw-readme"; mkdir -p "$R/raw"
fi

if want tests; then
step "tests/gpu"
left 60 && timeout -k 5 $((BUDGET_S - SECONDS - 200)) $PY -m pytest -q -m gpu tests/gpu -rs -p no:cacheprovider 2>&1 \
  | tee "$R/tests-gpu.txt"
fi

if want explain; then
step "explain: real failed GPU jobs (bench/real_runs_gpu.py)"
names=$($PY -c "from bench.real_runs_gpu import scenarios; \
print(' '.join(s['name'] for s in scenarios(dict)))")
left 120 && timeout -k 5 $((BUDGET_S - SECONDS - 60)) $PY -m bench.explain_real_runs \
  --only $names --record "$R/runs-gpu" 2>&1 | tee "$R/explain-gpu.txt"
fi

if want faults; then
step "faults"
run two-ranks-one-gpu 90 -- --nproc-per-node 2
run visible-devices-absent 60 CUDA_VISIBLE_DEVICES=3
run nccl-ifname-missing 60 NCCL_SOCKET_IFNAME=eth9
run gloo-on-gpu-node 90 -- --backend gloo
$PY -c "import torch,time; x=torch.empty(60<<30,dtype=torch.uint8,device='cuda'); \
print('holding 60 GiB',flush=True); time.sleep(100)" &
HOG=$!; sleep 12
run memory-held-by-another 60
kill $HOG; wait $HOG 2>/dev/null
fi

if want launches; then
step "launch styles and stages the first session did not cover"
run spawn-env 120 -- --launch spawn --checkpoint-dir "$R/ckpt-spawn"
run spawn-tcp 120 -- --launch spawn --init-method tcp://127.0.0.1:29533
run spawn-file 120 -- --launch spawn --init-method "file://$R/init-file"
run checkpoint 120 -- --checkpoint-dir "$R/ckpt" --checkpoint-size 1G
run visible-devices-empty 90 CUDA_VISIBLE_DEVICES=
fi

if want nodes; then
# two "nodes" on this one machine, both on its one GPU (as two nodes whose scheduler handed
# them the same GPU could not be): placement compares boards by UUID
step "two nodes, one GPU"
if left 100; then
  pids=()
  for n in 0 1; do
    timeout -k 5 90 $PY -m ddpcheck run --nodes 2 --node-rank $n --rdzv-endpoint 127.0.0.1:29544 \
      --rdzv-id gpu2 --json "$R/reports/two-nodes-$n.json" >"$R/reports/two-nodes-$n.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"  # not a bare wait: that also waits for the tee of this script's output
  cat "$R/reports/two-nodes-0.txt"; tail -5 "$R/reports/two-nodes-1.txt"
fi
# /dev/shm of 1 MiB (a container's default is 64 MiB): NCCL and DataLoader need more
step "small /dev/shm"
if left 80 && unshare -m --propagation private true 2>/dev/null; then
  unshare -m --propagation private sh -c "mount -t tmpfs -o size=1M tmpfs /dev/shm && \
    timeout -k 5 70 $PY -m ddpcheck run --json $R/reports/shm-1m.json" 2>&1 \
    | tee "$R/reports/shm-1m.txt"
fi
fi

step "packed"
ls -la "$OUT"
