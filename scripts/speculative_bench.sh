#!/usr/bin/env bash
# Prompt-lookup speculative decoding, end to end, on "cycle" models
# (`redline make-model --cycle`): greedy decoding of such a model follows a
# fixed random cycle through its vocabulary, so a passage it wrote, given
# back in the prompt, is continued as written. Two prompts per model:
#   echo:  the passage, then its first token again; the answer repeats the
#          passage (the best case: every draft is right);
#   miss:  every pair of consecutive answer tokens appears in the prompt
#          followed by a wrong token; every draft the lookup makes is
#          rejected (the worst case: the drafts cost passes, nothing gained).
# Each round runs plain and --speculative decoding on both prompts (order
# alternating between rounds), checks that the tokens are identical, and
# the medians of decode tok/s are printed with a median ratio speculative /
# plain. The second run of a round is often slower on a shared VM (seen:
# ~5 % either way), so rounds come in pairs, one of each order, and the
# ratio is the median over pairs of the two rounds' geometric mean (an odd
# ROUNDS is rounded up).
#
# usage: scripts/speculative_bench.sh [-r ROUNDS] [-n TOKENS] [-t THREADS]
#                                     [--redline BIN] MODEL.gguf...
set -euo pipefail

rounds=6
tokens=128
threads=2
redline=build/release/bin/redline
models=()
while (($#)); do
  case "$1" in
    -r) rounds="$2"; shift 2 ;;
    -n) tokens="$2"; shift 2 ;;
    -t) threads="$2"; shift 2 ;;
    --redline) redline="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    -*) echo "speculative_bench: unknown option $1" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
if ((${#models[@]} == 0)); then
  echo "speculative_bench: give one or more make-model --cycle files" >&2
  exit 2
fi
[[ -x "$redline" ]] || { echo "speculative_bench: no $redline" >&2; exit 2; }
((rounds % 2 == 0)) || rounds=$((rounds + 1))

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Greedy walk of $2 tokens after token id $1, as space-separated ids.
walk() {
  "$redline" run -m "$model" --prompt-ids "$1" -n "$2" --temp 0 \
    --ignore-eos --print-ids -q -t "$threads" 2>/dev/null | tail -n 1
}

# One generation; prints "tok/s tokens_per_pass drafted accepted" and writes
# the ids to $3.
measure() {
  local prompt="$1" mode="$2" ids="$3" out
  out=$("$redline" run -m "$model" --prompt-ids "$prompt" -n "$tokens" \
    --temp 0 --ignore-eos --print-ids -q -t "$threads" $mode 2>&1)
  echo "$out" | grep -E '^[0-9]+( [0-9]+)*$' | tail -n 1 > "$ids"
  local tps spec
  tps=$(echo "$out" | awk '/^decode /{print $2}')
  spec=$(echo "$out" | awk '/^speculative /{gsub(/\(/, ""); print $2, $6, $8}')
  echo "$tps ${spec:-1 0 0}"
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

printf '| model | prompt | plain tok/s | speculative tok/s | ratio | tokens per pass | drafted / accepted |\n'
printf '|---|---|---:|---:|---:|---:|---:|\n'
for model in "${models[@]}"; do
  start=300
  read -r -a answer <<< "$(walk "$start" $((tokens + 16)))"
  read -r -a junk <<< "$(walk 400 $((tokens + 16)))"
  if ((${#answer[@]} < tokens + 16 || ${#junk[@]} < tokens + 16)); then
    echo "speculative_bench: cannot generate from $model" >&2
    exit 1
  fi
  # echo: start, the answer, start again.
  echo_prompt="$start,$(IFS=,; echo "${answer[*]}"),$start"
  # miss: (a_i, a_i+1, junk_i) for every answer position, then start.
  seq=("$start" "${answer[@]}")
  miss_prompt=""
  for ((i = 0; i < tokens + 8; ++i)); do
    miss_prompt+="${seq[i]},${seq[i+1]},${junk[i]},"
  done
  miss_prompt+="$start"
  for kind in echo miss; do
    prompt_var="${kind}_prompt"
    : > "$work/plain_$kind"
    : > "$work/spec_$kind"
    for ((r = 1; r <= rounds; ++r)); do
      if ((r % 2)); then order="plain spec"; else order="spec plain"; fi
      for mode in $order; do
        flag=""
        [[ $mode == spec ]] && flag="--speculative"
        measure "${!prompt_var}" "$flag" "$work/ids_$mode" >> "$work/${mode}_$kind"
      done
      if ! cmp -s "$work/ids_plain" "$work/ids_spec"; then
        echo "speculative_bench: $model $kind: speculative tokens differ" >&2
        exit 1
      fi
    done
    plain=$(cut -d' ' -f1 "$work/plain_$kind" | median)
    spec=$(cut -d' ' -f1 "$work/spec_$kind" | median)
    per_pass=$(cut -d' ' -f2 "$work/spec_$kind" | median)
    drafted=$(cut -d' ' -f3 "$work/spec_$kind" | median)
    accepted=$(cut -d' ' -f4 "$work/spec_$kind" | median)
    ratio=$(paste -d' ' "$work/spec_$kind" "$work/plain_$kind" |
      awk '{r = $1 / $5} NR % 2 == 0 {printf "%.4f\n", sqrt(prev * r)} {prev = r}' |
      median)
    printf '| %s | %s | %s | %s | %.2fx | %.2f | %s / %s |\n' \
      "$(basename "$model")" "$kind" "$plain" "$spec" "$ratio" "$per_pass" \
      "$drafted" "$accepted"
  done
done
