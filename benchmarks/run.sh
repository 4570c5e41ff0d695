#!/bin/sh
# run.sh builds toolloop's and eino's benchmark binaries and runs them in
# interleaved rounds (toolloop, eino, toolloop, eino, ...), so that a busy
# machine's changes of pace fall on both sides alike. It prints each
# benchmark line with its round and the load average before it, then the
# median of every figure over the rounds.
#
#   benchmarks/run.sh [rounds] [run|concurrent|all]      (default: 3 all)
#
# Environment: BIN, where the binaries go (default /tmp/b); BEFORE, the
# path of another build of loop's test binary (say, of an earlier commit),
# run in each round after toolloop's as "before"; GOMAXPROCS and GOGC pass
# through to the benchmarks; BENCHTIME, BenchmarkRun's -test.benchtime
# (default 2s).
set -eu

rounds=${1:-3}
which=${2:-all}
bin=${BIN:-/tmp/b}
benchtime=${BENCHTIME:-2s}
root=$(cd "$(dirname "$0")/.." && pwd)

mkdir -p "$bin"
(cd "$root" && go test -c -o "$bin/loop.test" ./loop)
(cd "$root/benchmarks/eino" && GOWORK=off go test -c -o "$bin/eino.test" .)

# bench SIDE ARGS... runs one binary and prints its benchmark lines, each
# prefixed with the round and side, plus any log lines it wrote.
bench() {
	side=$1
	shift
	case $side in
	loop) exe=$bin/loop.test label=toolloop ;;
	before) exe=$BEFORE label=before ;;
	*) exe=$bin/$side.test label=$side ;;
	esac
	"$exe" -test.run '^$' "$@" 2>&1 |
		awk -v r="$round" -v s="$label" '/^Benchmark/ { print "round " r " " s " " $0; next } /^ +[a-z_]+\.go:[0-9]+:|^(--- FAIL|FAIL|panic)/ { print "round " r " " s " log " $0 }'
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "commit $(git -C "$root" rev-parse --short HEAD), GOMAXPROCS=${GOMAXPROCS:-unset}, GOGC=${GOGC:-unset}, $(nproc) CPUs"
round=1
while [ "$round" -le "$rounds" ]; do
	for side in loop ${BEFORE:+before} eino; do
		echo "round $round load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%S)"
		if [ "$which" = run ] || [ "$which" = all ]; then
			if [ "$side" != eino ]; then
				bench "$side" -test.bench '^BenchmarkRun$' -test.benchtime "$benchtime" -test.benchmem
			else
				bench eino -test.bench '^BenchmarkEinoReAct$' -test.benchtime "$benchtime" -test.benchmem
			fi
		fi
		if [ "$which" = concurrent ] || [ "$which" = all ]; then
			bench "$side" -test.bench '^BenchmarkConcurrent$' -test.benchtime 1x
		fi
	done | tee -a "$out"
	round=$((round + 1))
done

# Medians: for each side, benchmark and unit, the middle of the sorted
# values (the lower middle for an even count).
echo "medians over $rounds rounds:"
awk '$3 != "load" && $4 ~ /^Benchmark/ { for (i = 6; i < NF; i += 2) print $3, $4, $(i + 1), $i }' "$out" |
	sort -k1,1 -k2,2 -k3,3 -k4,4g |
	awk '{ k = $1 " " $2 " " $3; v[k, ++n[k]] = $4; if (!(k in seen)) { seen[k] = 1; keys[++m] = k } }
		END { for (j = 1; j <= m; j++) { k = keys[j]; printf "  %s %s\n", k, v[k, int((n[k] + 1) / 2)] } }'
