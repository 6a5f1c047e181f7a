#!/usr/bin/env bash
# The examples' command lines (ctest examples_command_lines): every bad command line exits non-zero
# without a crash signal (status < 128) after exactly one line on stderr, `<program>: ...`, that
# names the flag or value at fault; the good ones, --help included, still work.
#   cli_checks.sh DEMO SEED_CHOLESKY_GRAD GP_FOURIER GP_GROUPED [GP_CO2]   (an empty GP_CO2 skips its checks)
set -uo pipefail
demo=$1 seed=$2 fourier=$3 grouped=$4 co2=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 checks=0

complain() {
  failures=$((failures + 1))
  echo "FAIL: $*"
  sed 's/^/    stderr: /' "$tmp/err" | head -5
}

# attempt LIMIT PROGRAM ARGS...: runs one check of PROGRAM, stdout and stderr in $tmp/out and
# $tmp/err; sets rc (its status), name (its file name) and shown (the command line, quoted).
attempt() {
  local limit=$1 program=$2
  shift 2
  checks=$((checks + 1))
  name=$(basename "$program")
  rc=0
  timeout "$limit" "$program" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  shown="$name$(printf ' %q' "$@")"
}

# bad NEEDLE PROGRAM ARGS...: rejected, with one line on stderr that starts with the program's name
# and contains NEEDLE (a fixed string), nothing on stdout.
bad() {
  local needle=$1
  shift
  attempt 20 "$@"
  if [ "$rc" -eq 0 ]; then complain "$shown: accepted (status 0)"; return; fi
  if [ "$rc" -eq 124 ]; then complain "$shown: still running after 20 s"; return; fi
  if [ "$rc" -ge 128 ]; then complain "$shown: killed by signal $((rc - 128)) (status $rc)"; return; fi
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ "$lines" -ne 1 ]; then complain "$shown: $lines lines on stderr, expected one"; return; fi
  if ! grep -q "^$name: " "$tmp/err"; then complain "$shown: stderr does not start with '$name: '"; return; fi
  if ! grep -qF -- "$needle" "$tmp/err"; then complain "$shown: stderr does not name '$needle'"; return; fi
  if [ -s "$tmp/out" ]; then complain "$shown: wrote to stdout"; return; fi
}

# good NEEDLE PROGRAM ARGS...: status 0 and NEEDLE (an extended regular expression) on stdout.
good() {
  local needle=$1
  shift
  attempt 30 "$@"
  if [ "$rc" -ne 0 ]; then complain "$shown: status $rc, expected 0"; return; fi
  if ! grep -qE -- "$needle" "$tmp/out"; then
    complain "$shown: stdout does not match '$needle'"
    sed 's/^/    stdout: /' "$tmp/out" | head -5
  fi
}

# --- demo: no arguments ---
good 'gradient = ' "$demo"
good 'traces for batch sizes 8 and 3: 1$' "$demo"  # the README's tour: one trace for every batch size
good 'curvature along the gradient = ' "$demo"        # and its Hessian
good 'scan: ar1 loss [0-9.]+, d loss / d phi -?[0-9.]+$' "$demo"  # and its loop
good 'Usage: .*demo' "$demo" --help
bad 'extra' "$demo" extra
bad '--bogus' "$demo" --bogus

# --- seed_cholesky_grad ---
small=(--nobs 16 --ngp 3 --reps 1)
good '"shared_cache": \{"traces": 1, "cache_hits": 3[,}]' "$seed" --nobs 16 --ngp 3 --nbatch 1,2,7,64 --reps 1 --json
good '"nobs": 16, "ngp": 3' "$seed" --nobs 016 --ngp=3 --nbatch 2 --reps 1 --json  # decimal, not octal
good '^ +2 ' "$seed" "${small[@]}" --nbatch 2
good '1\.\.65536' "$seed" --help
good '^Usage: .*seed_cholesky_grad' "$seed" -h
bad '--reps' "$seed" "${small[@]}" --reps 4294967296 --nbatch 2
bad '--reps' "$seed" "${small[@]}" --reps 0
bad '--reps' "$seed" "${small[@]}" --reps 1000001
bad '--reps' "$seed" "${small[@]}" --reps -1
bad '--reps' "$seed" "${small[@]}" --reps 1.5
bad '--nbatch' "$seed" "${small[@]}" --nbatch 4294967296
bad '--nbatch' "$seed" "${small[@]}" --nbatch 99999999999999999999
bad '--nbatch' "$seed" "${small[@]}" --nbatch 65537
bad '--nbatch' "$seed" "${small[@]}" --nbatch ''
bad '--nbatch' "$seed" "${small[@]}" --nbatch 16,
bad '--nbatch' "$seed" "${small[@]}" --nbatch ,16
bad '--nbatch' "$seed" "${small[@]}" --nbatch 16,,32
bad '--nbatch' "$seed" "${small[@]}" --nbatch 16,abc
bad '--nbatch' "$seed" "${small[@]}" --nbatch 0
bad '--nbatch' "$seed" "${small[@]}" --nbatch "$(printf '1,%.0s' {1..64})1"  # 65 batch sizes
bad '--nobs' "$seed" --nobs 16abc --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs 9223372036854775808 --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs 8193 --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs 0x10 --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs ' 16' --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs 1e3 --ngp 3 --reps 1
bad '--nobs' "$seed" --nobs --ngp 3
bad '--ngp' "$seed" --nobs 16 --ngp 4097 --reps 1
bad '--ngp' "$seed" --nobs 16 --ngp 99999999999 --reps 1
bad '--ngp' "$seed" --nobs 16 --reps 1 --ngp
bad '--bogus' "$seed" "${small[@]}" --bogus
bad 'extra' "$seed" "${small[@]}" extra
bad 'extra' "$seed" "${small[@]}" -- extra
bad '--pars' "$seed" "${small[@]}" --grad-out "$tmp/grad.npy"
bad '--pars' "$seed" "${small[@]}" --pars "$tmp/missing.npy"
bad '--device' "$seed" "${small[@]}" --device tpu
printf 'not an npy file\n' >"$tmp/garbage.npy"
bad 'garbage.npy' "$seed" "${small[@]}" --pars "$tmp/garbage.npy"  # a runtime error: one line too

# --- gp_fourier ---
good 'agree to [0-9.]+e-(1[0-9]|0[89])' "$fourier" --nobs 64 --ngp 8 --samples 4 --reps 1
good '1\.\.65536' "$fourier" --help
bad '--samples' "$fourier" --nobs 16 --ngp 2 --samples 99999999999
bad '--samples' "$fourier" --nobs 16 --ngp 2 --samples 0
bad '--samples' "$fourier" --nobs 16 --ngp 2 --samples 65537
bad '--nobs' "$fourier" --nobs 16abc
bad '--nobs' "$fourier" --nobs 8193
bad '--ngp' "$fourier" --ngp ''
bad '--ngp' "$fourier" --ngp 4097
bad '--reps' "$fourier" --reps 4294967296
bad '--bogus' "$fourier" --nobs 16 --ngp 2 --samples 2 --reps 1 --bogus
bad '--nobs' "$fourier" --ngp 2 --nobs
bad 'extra' "$fourier" --nobs 16 extra
# More memory than any machine has (4096 threads, each holding an 8192 x 8192 example): refused at once.
OMP_NUM_THREADS=4096 bad 'out of memory: the direct form needs at least' "$fourier" --nobs 8192 --ngp 2 --samples 4096
# A run estimated at more than a few seconds reports its progress on stderr.
OMP_NUM_THREADS=1 attempt 60 "$fourier" --nobs 1024 --ngp 2 --samples 20 --reps 1
if [ "$rc" -ne 0 ] || ! grep -qE '^gp_fourier: direct form: 20 samples, each an order-1024 factorization and its gradient' "$tmp/err" ||
   ! grep -qE '^gp_fourier: direct form: 20 of 20 samples in [0-9]+ s$' "$tmp/err"; then
  complain "$shown: status $rc, or no progress on stderr"
fi

# --- gp_grouped ---
good 'agree to ([0-9.]+e-(1[0-9]|0[89])|0\.0e\+00) \(value\)' "$grouped" --npoints 64 --ngroups 8 --nbatch 3 --ncheck 2 --reps 1
good '"ncheck": 1' "$grouped" --npoints 32 --ngroups 4 --nclasses 1 --nbatch 1 --ncheck 1 --reps 1 --json
good '1\.\.8192' "$grouped" --help
bad '--ncheck' "$grouped" --nbatch 2 --ncheck 3
bad '--ncheck' "$grouped" --ncheck 17
bad '--npoints' "$grouped" --npoints 0
bad '--ngroups' "$grouped" --ngroups 8193
bad '--nclasses' "$grouped" --nclasses 65
bad '--nbatch' "$grouped" --nbatch 1.5
bad '--bogus' "$grouped" --bogus
bad 'extra' "$grouped" --npoints 16 extra

# --- gp_co2 ---
if [ -n "$co2" ]; then
  theta=7.604416279,3.943521672,1.941557834,4.516338972,0.3920420878,-1.247242236,1.061256502,-0.03252319171,-3.342626632,-2.103734234,-3.304978524
  good '"lml": -115\.05163' "$co2" --eval --theta "$theta"
  good '"lml": ' "$co2" --eval --theta "-$theta"  # a list that starts with a minus sign is a value
  # Error bars from the Hessian at the optimum, which must match central differences of the gradient.
  good 'central differences of the gradient: largest difference [0-9.]+e-(0[5-9]|[1-9][0-9]) ' "$co2" --errors --starts 1
  good '1\.\.256' "$co2" --help
  bad '--theta' "$co2" --eval --theta "7.6x,${theta#*,}"
  bad '--theta' "$co2" --eval --theta "$theta,"
  bad '--theta' "$co2" --eval --theta ",$theta"
  bad '--theta' "$co2" --eval --theta "${theta/,/,,}"
  bad '--theta' "$co2" --eval --theta 1,2,3
  bad '--theta' "$co2" --eval --theta "$theta,1"
  bad '--theta' "$co2" --eval --theta "nan,${theta#*,}"
  bad '--theta' "$co2" --eval --theta "1e999,${theta#*,}"
  bad '--theta' "$co2" --eval --theta ''
  bad '--theta' "$co2" --eval
  bad '--starts' "$co2" --starts 1abc
  bad '--starts' "$co2" --starts 99999999999
  bad '--starts' "$co2" --starts 0
  bad '--starts' "$co2" --starts 257
  bad '--starts' "$co2" --starts ''
  bad '--data' "$co2" --data "$tmp/missing.csv" --eval --theta "$theta"
  printf 't,value\n1958.2,315.7\n1958.3,oops\n' >"$tmp/bad.csv"
  bad 'bad.csv:3' "$co2" --data "$tmp/bad.csv" --eval --theta "$theta"  # a runtime error: one line too
  # Too few rows to fit 11 hyperparameters: refused, naming the file; evaluating there still works.
  printf 't,value\n1958.2,315.7\n' >"$tmp/one.csv"
  bad 'one.csv: 1 data row; fitting the 11 hyperparameters needs at least 12' "$co2" --data "$tmp/one.csv"
  awk 'NR > 1 && NR <= 13' "$(dirname "$0")/data/co2_monthly.csv" | sed '1i t,value' >"$tmp/twelve.csv"
  head -12 "$tmp/twelve.csv" >"$tmp/eleven.csv"
  bad 'eleven.csv: 11 data rows' "$co2" --data "$tmp/eleven.csv" --starts 1
  good '"data": ".*/one\.csv", "n": 1, ' "$co2" --data "$tmp/one.csv" --eval --theta "$theta"
  good '^.*/twelve\.csv, 12 rows; 1 starts' "$co2" --data "$tmp/twelve.csv" --starts 1
  good '^Mauna Loa CO2 \(examples/data/co2_monthly\.csv\), 521 rows' "$co2" --starts 1
  bad '--device' "$co2" --device cuda:x --eval --theta "$theta"
  bad '--bogus' "$co2" --eval --theta "$theta" --bogus
  bad 'extra' "$co2" --json extra
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures of $checks command-line checks failed"
  exit 1
fi
echo "command lines ok ($checks checks)"
