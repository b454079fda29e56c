#!/usr/bin/env bash
# Redline against llama.cpp on the same GGUF files, interleaved: each round
# runs `llama-bench` and `redline bench-model` back to back on every file
# (which goes first alternates between rounds, since the second run of a
# pair is often slower on a shared VM), and prints per round the decode and
# prefill tok/s of both, their ratio, and Redline's decode roofline share
# (each decode repeat against a bandwidth pass right after it, whose median
# GB/s is printed beside it). Then the median ratio per file over the
# rounds. llama.cpp must be a native build of its source made outside this
# repository (its path is an argument); its flags are printed with the
# results (flash attention on, f16 KV).
#
# With --depth D (repeatable) the decode test instead runs after D tokens
# already in the KV cache, through `llama-batched-bench` (`-npp D -ntg N
# -npl 1`, its S_TG) next to `redline bench-model -d D`; depth 0 uses
# llama-bench as above.
#
# usage: scripts/llamacpp_compare.sh --llama DIR [-r ROUNDS] [-t THREADS]
#          [-p PROMPT] [-n TOKENS] [--depth D]... [--redline BIN] MODEL...
#   DIR: llama.cpp's build/bin (llama-bench, llama-batched-bench)
set -euo pipefail

rounds=3
threads=2
prompt=128
tokens=32
redline=build/release/bin/redline
llama=""
depths=()
models=()
while (($#)); do
  case "$1" in
    --llama) llama="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    -p) prompt="$2"; shift 2 ;;
    -n) tokens="$2"; shift 2 ;;
    --depth) depths+=("$2"); shift 2 ;;
    --redline) redline="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "llamacpp_compare: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
if [[ -z "$llama" || ${#models[@]} == 0 ]]; then
  echo "llamacpp_compare: give --llama DIR and one or more GGUF files" >&2
  exit 2
fi
for tool in "$llama/llama-bench" "$redline"; do
  [[ -x "$tool" ]] || { echo "llamacpp_compare: $tool not found" >&2; exit 2; }
done
if ((${#depths[@]})) && [[ ! -x "$llama/llama-batched-bench" ]]; then
  echo "llamacpp_compare: $llama/llama-batched-bench not found" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Flash attention on: newer llama-batched-bench builds take a value
# (`-fa on`), older ones a bare `-fa`. The help text is read whole first:
# piped into `grep -q`, the tool could die of SIGPIPE once grep matched,
# and pipefail then read the match as a miss.
batched_fa=(-fa)
if ((${#depths[@]})); then
  batched_help=$("$llama/llama-batched-bench" --help 2>&1 || true)
  if [[ $batched_help == *"--flash-attn [on"* ]]; then
    batched_fa=(-fa on)
  fi
fi

echo "llama.cpp: $llama (llama-bench -t $threads -p $prompt -n $tokens -fa 1;" \
     "llama-batched-bench ${batched_fa[*]} -t $threads -npl 1 for depths), f16 KV"
echo "redline: $redline bench-model -t $threads --prefill $prompt -n $tokens"

# One comparison; prints "name depth tg_redline tg_llama pp_redline pp_llama
# share bandwidth" (the paired share and its passes' median GB/s).
run_pair() {
  local model=$1 depth=$2 order=$3 name
  name=$(basename "$model" .gguf)
  local l="$work/l.json" lt="$work/l.txt" r="$work/r.json"
  run_llama() {
    if ((depth == 0)); then
      "$llama/llama-bench" -m "$model" -t "$threads" -p "$prompt" -n "$tokens" \
        -r 3 -fa 1 -o json > "$l" 2> /dev/null
    else
      "$llama/llama-batched-bench" -m "$model" -c $((depth + tokens + 64)) \
        -b 2048 -ub 512 -npp "$depth" -ntg "$tokens" -npl 1 "${batched_fa[@]}" \
        -t "$threads" > "$lt" 2>&1
    fi
  }
  run_redline() {
    "$redline" bench-model -m "$model" -t "$threads" --prefill "$prompt" \
      -n "$tokens" -r 3 -d "$depth" --format json -q > "$r" 2> /dev/null
  }
  if ((order == 0)); then run_llama; run_redline; else run_redline; run_llama; fi
  python3 - "$l" "$lt" "$r" "$name" "$depth" << 'EOF'
import json, re, sys
l_json, l_txt, r_json, name, depth = sys.argv[1:6]
depth = int(depth)
red = json.load(open(r_json))
tests = [t for t in red["tests"] if t["depth"] == depth]
rtg = [t["tok_per_s_median"] for t in tests if t["name"].startswith("tg")][0]
rpp = [t["tok_per_s_median"] for t in tests if t["name"].startswith("pp")][0]
if depth == 0:
    ll = json.load(open(l_json))
    ltg = [x["avg_ts"] for x in ll if x["n_gen"] > 0][0]
    lpp = [x["avg_ts"] for x in ll if x["n_prompt"] > 0][0]
else:
    # | PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | ...
    row = [r for r in open(l_txt) if re.match(r"^\|\s*%d\s*\|" % depth, r)][0]
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    ltg, lpp = float(cells[7]), float("nan")
share = red.get("decode_roofline_share_paired", float("nan"))
passes = sorted(red.get("decode_paired_bandwidth_gbps", []))
gbps = passes[len(passes) // 2] if passes else float("nan")
print(name, depth, rtg, ltg, rpp, lpp, share, gbps)
EOF
}

results="$work/results.txt"
: > "$results"
((${#depths[@]})) || depths=(0)
for ((round = 1; round <= rounds; round++)); do
  for model in "${models[@]}"; do
    for depth in "${depths[@]}"; do
      line=$(run_pair "$model" "$depth" $(((round + 1) % 2)))
      echo "$line" >> "$results"
      python3 -c '
import sys
name, d, rtg, ltg, rpp, lpp, share, gbps = sys.argv[1].split()
rtg, ltg, rpp, lpp, share, gbps = map(float, (rtg, ltg, rpp, lpp, share, gbps))
print("%-28s d%-5s r%s  tg %7.2f / %7.2f = %5.2fx   pp %7.1f / %7.1f = %5.2fx   share %3.0f%% of %4.1f GB/s"
      % (name, d, sys.argv[2], rtg, ltg, rtg / ltg, rpp, lpp, rpp / lpp, 100 * share, gbps))
' "$line" "$round"
    done
  done
done

echo
echo "medians over $rounds rounds (redline / llama.cpp):"
python3 - "$results" << 'EOF'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, d, rtg, ltg, rpp, lpp, share, _ = line.split()
    rows[(name, int(d))].append((float(rtg), float(ltg), float(rpp), float(lpp), float(share)))
print("| file | depth | decode tok/s redline | llama.cpp | ratio | prefill ratio | decode roofline share |")
print("|---|---:|---:|---:|---:|---:|---:|")
for (name, d), v in rows.items():
    med = lambda xs: statistics.median(xs)
    tg = med([r[0] / r[1] for r in v])
    pp = [r[2] / r[3] for r in v if r[3] == r[3]]
    pp_s = "%.2fx" % med(pp) if pp else "-"
    print("| %s | %d | %.2f | %.2f | %.2fx | %s | %.0f %% |" % (
        name, d, med([r[0] for r in v]), med([r[1] for r in v]), tg, pp_s,
        100 * med([r[4] for r in v])))
EOF
