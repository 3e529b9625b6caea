#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz (one per file reader: token shards, model files,
# checkpoints, GPT-2 vocabulary files, safetensors with the GPT-2 import, and the tokenizer round trip)
# with clang, ASan and UBSan, and runs each for a fixed time on a scratch copy of its committed seed
# corpus (tests/fuzz/corpus/<harness>).
# The harnesses compile only the project sources they need, straight from src/, into build-fuzz/ (a
# generated build.ninja tracks header dependencies), so the fuzz build never touches the CMake builds.
#
#   scripts/fuzz.sh [--update-corpus] [SECONDS] [HARNESS...]
#     SECONDS          time per harness (default: $FUZZ_SECONDS or 30)
#     HARNESS          names (fuzz_data_shard ...) or short names (data_shard ...); default: all
#     --update-corpus  merge the inputs that add coverage back into tests/fuzz/corpus (otherwise the
#                      committed corpus is never changed)
# Environment: FUZZ_CXX (compiler), FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs, 2),
# FUZZ_PARALLEL (harnesses run at once, default: the cores),
# FUZZ_NO_LLD=1 (link with the default linker and the FSDP engine instead of lld's section GC).
# Prints executions and crashes per harness; exits non-zero when any harness crashed, hit a sanitizer
# report, a failed property, a timeout (-timeout=10 per input) or the memory limit (-rss_limit_mb=2048).
# Crash inputs are kept in build-fuzz/run/<harness>/artifacts/; replay one with
#   build-fuzz/<harness> <file>         (FUZZ_VERBOSE=1 prints the gpt::Error of rejected inputs)
# Without clang or libFuzzer it prints a "skipped" line and exits 0; as root it first tries to install
# the libFuzzer runtime (libclang-rt-<version>-dev) with apt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_PER=${FUZZ_SECONDS:-30}
UPDATE=0
ALL=(fuzz_data_shard fuzz_model_file fuzz_checkpoint fuzz_tokenizer_files fuzz_tokenizer_roundtrip fuzz_safetensors)
SELECTED=()

for arg in "$@"; do
  case "$arg" in
    --update-corpus) UPDATE=1 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    ''|*[!0-9]*)
      name=${arg#fuzz_}
      [[ " ${ALL[*]} " == *" fuzz_$name "* ]] || { echo "fuzz: unknown harness '$arg' (known: ${ALL[*]})" >&2; exit 2; }
      SELECTED+=("fuzz_$name") ;;
    *) SECONDS_PER=$arg ;;
  esac
done
[[ ${#SELECTED[@]} -gt 0 ]] || SELECTED=("${ALL[@]}")

skip() { echo "fuzz: skipped ($1)"; exit 0; }

# --- compiler and libFuzzer --------------------------------------------------------------------------
CXX=${FUZZ_CXX:-}
if [[ -z "$CXX" ]]; then
  for c in clang++ clang++-19 clang++-18 clang++-17 clang++-16 clang++-15 clang++-14; do
    if command -v "$c" >/dev/null 2>&1; then CXX=$c; break; fi
  done
fi
[[ -n "$CXX" ]] && command -v "$CXX" >/dev/null 2>&1 ||
  skip "clang++ not found; install clang and libclang-rt-dev to run the fuzzers"
mkdir -p "$BUILD/probe"

probe() {  # $1: extra flags; compiles and links a trivial fuzzer
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    > "$BUILD/probe/probe.cpp"
  "$CXX" -fsanitize=fuzzer,address,undefined $1 "$BUILD/probe/probe.cpp" -o "$BUILD/probe/probe" \
    >"$BUILD/probe/log.txt" 2>&1
}

if ! probe ""; then
  major=$("$CXX" -dumpversion 2>/dev/null | cut -d. -f1)
  if [[ -n "$major" && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "fuzz: libFuzzer runtime missing for $CXX; installing libclang-rt-$major-dev"
    for pkg in "libclang-rt-$major-dev" "libfuzzer-$major-dev"; do  # Debian 12+ / older releases
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1; } && break
    done
  fi
  probe "" || skip "$CXX cannot link -fsanitize=fuzzer (libclang_rt.fuzzer missing: apt-get install libclang-rt-$major-dev)"
fi

# --- sources per harness -----------------------------------------------------------------------------
# checkpoint.cpp also holds save/load, which call the FSDP engine. With lld and --gc-sections the unused
# functions (and their references to the engine) are dropped; with another linker the engine and what it
# needs (backend, kernels, OpenBLAS) are compiled in; without -fopenmp the kernels' OpenMP pragmas are
# ignored, which is all the checkpoint reader needs (and spares a dependency on clang's libomp).
IO_TOKENIZER="src/io/tokenizer.cpp src/io/byte_tokenizer.cpp src/io/gpt2_tokenizer.cpp src/io/gpt2_vocab.cpp
              src/io/gpt2_pretokenize.cpp src/io/json_min.cpp src/io/unicode_tables.cpp src/io/atomic_file.cpp"
MODEL="src/model/config.cpp src/model/layout.cpp src/model/wrap.cpp"
declare -A SOURCES=(
  [fuzz_data_shard]="src/io/data_loader.cpp src/io/atomic_file.cpp"
  [fuzz_model_file]="src/io/model_file.cpp src/io/atomic_file.cpp $MODEL"
  [fuzz_checkpoint]="src/train/checkpoint.cpp src/io/atomic_file.cpp $MODEL"
  [fuzz_tokenizer_files]="$IO_TOKENIZER"
  [fuzz_tokenizer_roundtrip]="$IO_TOKENIZER"
  [fuzz_safetensors]="src/io/safetensors.cpp src/io/hf_gpt2.cpp src/io/hf_config.cpp src/io/hf_index.cpp src/io/json_min.cpp src/io/unicode_tables.cpp
                      src/io/atomic_file.cpp $MODEL"
)
LDFLAGS=""
EXTRA_INCLUDES=""
if [[ -z ${FUZZ_NO_LLD:-} ]] && probe "-fuse-ld=lld -Wl,--gc-sections"; then
  LDFLAGS="-fuse-ld=lld -Wl,--gc-sections"
else
  engine=$(cd "$ROOT" && ls src/fsdp/*.cpp src/backend/*.cpp kernels/cpu/*.cpp src/model/*.cpp src/util/*.cpp | tr '\n' ' ')
  SOURCES[fuzz_checkpoint]="src/train/checkpoint.cpp src/io/atomic_file.cpp src/dist/comm_single.cpp
                            src/dist/comm_ledger.cpp $engine"
  for d in /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/x86_64-linux-gnu/openblas-pthread \
           /usr/include/openblas; do
    [[ -f $d/cblas.h ]] && { EXTRA_INCLUDES="-I$d"; break; }
  done
  LDFLAGS="-Wl,--gc-sections -lopenblas"
fi

# --- build ---------------------------------------------------------------------------------------------
CXXFLAGS="-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
          -fno-sanitize-recover=undefined -ffunction-sections -fdata-sections -Wno-unknown-pragmas
          -I$ROOT $EXTRA_INCLUDES -DGPT_SOURCE_DIR=\\\"$ROOT\\\""
CXXFLAGS=$(echo $CXXFLAGS)

obj_of() { echo "obj/${1%.cpp}.o"; }

write_ninja() {
  local f=$BUILD/build.ninja.tmp
  {
    echo "# generated by scripts/fuzz.sh"
    echo "cxx = $CXX"
    echo "cxxflags = $CXXFLAGS"
    echo "ldflags = -fsanitize=fuzzer,address,undefined $LDFLAGS"
    echo "rule cxx"
    echo "  command = \$cxx \$cxxflags -MD -MF \$out.d -c \$in -o \$out"
    echo "  depfile = \$out.d"
    echo "  deps = gcc"
    echo "  description = CXX \$out"
    echo "rule link"
    echo "  command = \$cxx \$in -o \$out \$ldflags"
    echo "  description = LINK \$out"
    declare -A seen=()
    local h s objs
    for h in "${SELECTED[@]}"; do
      objs=""
      for s in tests/fuzz/$h.cpp ${SOURCES[$h]}; do
        objs+=" $(obj_of "$s")"
        if [[ -z ${seen[$s]:-} ]]; then
          seen[$s]=1
          echo "build $(obj_of "$s"): cxx $ROOT/$s"
        fi
      done
      echo "build $h: link$objs"
    done
  } > "$f"
  mv "$f" "$BUILD/build.ninja"
}

build() {
  if command -v ninja >/dev/null 2>&1; then
    write_ninja
    ninja -C "$BUILD" -j "${FUZZ_JOBS:-2}" "${SELECTED[@]}"
    return
  fi
  # No ninja: compile every object (no header tracking), one after another.
  local h s objs o
  for h in "${SELECTED[@]}"; do
    objs=()
    for s in tests/fuzz/$h.cpp ${SOURCES[$h]}; do
      o=$BUILD/$(obj_of "$s")
      mkdir -p "$(dirname "$o")"
      if [[ ! -f $o || $ROOT/$s -nt $o ]]; then
        echo "CXX $o"
        eval "$CXX $CXXFLAGS -c $ROOT/$s -o $o"
      fi
      objs+=("$o")
    done
    "$CXX" "${objs[@]}" -o "$BUILD/$h" -fsanitize=fuzzer,address,undefined $LDFLAGS
  done
}

echo "fuzz: building ${SELECTED[*]} with $CXX into $BUILD"
build

# --- run -----------------------------------------------------------------------------------------------
export GPT_FUZZ_DATA_DIR=${GPT_FUZZ_DATA_DIR:-$ROOT/data}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# The sanitizer/libFuzzer report of a failed run: from its first line to the SUMMARY (40 lines at most).
report() {
  local start='==[0-9]+==ERROR|runtime error:|fuzz: property violated|ALARM: working on|out-of-memory|'
  start+='malloc\(|deadly signal|terminate called|uncaught exception'
  if grep -q -E "$start" "$1"; then
    awk -v re="$start" '!on && $0 ~ re {on=1} on {print; if (++n >= 40 || /^SUMMARY:/) exit}' "$1"
  else
    grep -v -E '^#[0-9]+' "$1" | tail -n 30
  fi
}

# One harness's run in build-fuzz/run/<harness>: its summary line (and on failure the report) in summary.txt,
# "ok" or "failed" in status.
run_one() {
  local h=$1 work=$BUILD/run/$1 seeds=$ROOT/tests/fuzz/corpus/$1 rc=0 scratch=/tmp
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  [[ -d $seeds ]] && cp "$seeds"/* "$work/corpus/" 2>/dev/null || true
  local before dict=() execs crashes after
  before=$(ls "$work/corpus" | wc -l)
  [[ -f $ROOT/tests/fuzz/$h.dict ]] && dict=("-dict=$ROOT/tests/fuzz/$h.dict")
  [[ -d /dev/shm && -w /dev/shm ]] && scratch=/dev/shm
  export FUZZ_SCRATCH=$scratch/gpt-fuzz-run-$$-$h  # the harness's own files (one per harness running)
  timeout -k 10 $((SECONDS_PER + 120)) "$BUILD/$h" "$work/corpus" "${dict[@]}" \
    -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" > "$work/log.txt" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log.txt" | tail -1 | awk '{print $2}' || true)
  [[ -n $execs ]] || execs=$(grep -oE '^#[0-9]+' "$work/log.txt" | tail -1 | tr -d '#' || true)
  crashes=$(ls "$work/artifacts" | wc -l)
  after=$(ls "$work/corpus" | wc -l)
  {
    echo "fuzz: $h: ${execs:-0} executions in ${SECONDS_PER}s from $before seeds, $crashes crashes, exit $rc, corpus $before -> $after inputs"
    if [[ $rc -ne 0 || $crashes -gt 0 ]]; then
      echo "----- $h: report (full log: $work/log.txt) -----"
      report "$work/log.txt"
      echo "----- artifacts: $(ls "$work/artifacts" | sed "s|^|$work/artifacts/|" | tr '\n' ' ')"
    fi
  } > "$work/summary.txt"
  [[ $rc -eq 0 && $crashes -eq 0 ]] && echo ok > "$work/status" || echo failed > "$work/status"
  rm -rf "$FUZZ_SCRATCH"
}

# Each harness is one single-threaded process: FUZZ_PARALLEL of them (default: the cores) run at once, each
# for its full SECONDS_PER.
parallel=${FUZZ_PARALLEL:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
[[ $parallel =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_PARALLEL=$parallel: expected a positive integer" >&2; exit 2; }
echo "fuzz: running ${#SELECTED[@]} harnesses for ${SECONDS_PER}s each, $parallel at a time"
running=0
for h in "${SELECTED[@]}"; do
  if [[ $running -ge $parallel ]]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_one "$h" &
  running=$((running + 1))
done
wait

failed=()
for h in "${SELECTED[@]}"; do
  work=$BUILD/run/$h
  cat "$work/summary.txt" 2>/dev/null || echo "fuzz: $h: no summary (the run did not finish)"
  [[ $(cat "$work/status" 2>/dev/null) == ok ]] || failed+=("$h")
  if [[ $UPDATE -eq 1 ]]; then
    seeds=$ROOT/tests/fuzz/corpus/$h
    mkdir -p "$seeds"
    "$BUILD/$h" -merge=1 "$seeds" "$work/corpus" > "$work/merge.txt" 2>&1 ||
      echo "fuzz: $h: corpus merge failed (see $work/merge.txt)"
    echo "fuzz: $h: committed corpus now $(ls "$seeds" | wc -l) inputs"
  fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: FAILED: ${failed[*]}"
  exit 1
fi
echo "fuzz: all ${#SELECTED[@]} harnesses ran ${SECONDS_PER}s each without a crash"
