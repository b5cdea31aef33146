#!/usr/bin/env bash
# benchcmp.sh compares the go test benchmarks of two commits by the number
# of instructions each benchmark iteration executes, counted by valgrind's
# callgrind. Instruction counts do not depend on the machine's load, so the
# comparison holds on a shared or noisy machine where ns/op does not.
#
# Usage:
#
#   scripts/benchcmp.sh [-j JOBS] [-l LIST] [-o DIR] BASE HEAD
#
#   BASE, HEAD  commits (anything git rev-parse accepts; HEAD may be HEAD)
#   -j JOBS     valgrind runs at once (default 2)
#   -l LIST     benchmarks to compare (default scripts/benchcmp.list; its
#               header gives the format: package, benchmark, N1, N2 and the
#               package on the base side when the benchmark moved)
#   -o DIR      keep the raw results there (default: a temporary directory)
#
# It checks both commits out as detached worktrees in a temporary
# directory, builds each listed package's test binary there (go test -c),
# runs every listed benchmark under
#
#   GOMAXPROCS=1 GOGC=off GOMEMLIMIT=4GiB GODEBUG=asyncpreemptoff=1 \
#     valgrind --tool=callgrind PKG.test -test.run='^$' \
#       -test.bench='^BenchmarkX$/^sub$' -test.benchtime=Nx
#
# from the package's directory, once with N1 and once with N2 iterations,
# and prints a Markdown table of instructions per iteration,
# (I(N2) - I(N1)) / (N2 - N1), which cancels the process start and the
# benchmark's setup. One P (GOMAXPROCS=1) keeps idle runtime threads from
# spinning, which otherwise adds millions of load-dependent instructions;
# a benchmark is so measured as the work of one core. The garbage
# collector is off (GOGC=off; GOMEMLIMIT only guards memory), since
# whether a collection falls inside the N2 - N1 iterations moved a
# benchmark's count by 10%: the counts are the benchmark's own work,
# allocation included, collection excluded, and the allocs/op columns show
# what the collector would have to do. Rows more than 5% slower are
# flagged. A benchmark that is missing on a side, or skips
# there (some read ../shared, found through $GPUTOPO_SHARED, which this
# script sets to the shared directory beside the repository when there is
# one), shows "-".
#
# Needs valgrind (3.19 or later), git and the Go toolchain. Repeated runs
# of one benchmark agree to about 0.1%.
set -euo pipefail

# one: run a benchmark under callgrind and print its instruction count.
# Arguments: test binary, package directory, benchmark name, iterations.
if [[ "${1:-}" == "--one" ]]; then
	bin=$2 dir=$3 name=$4 n=$5 out=$6
	pattern=""
	IFS=/ read -r -a parts <<<"$name"
	for p in "${parts[@]}"; do
		p=$(printf '%s' "$p" | sed 's/[][\.*^$+?(){}|]/\\&/g')
		pattern+="${pattern:+/}^${p}\$"
	done
	cg=$(mktemp "${TMPDIR:-/tmp}/benchcmp.cg.XXXXXX")
	log=$(mktemp "${TMPDIR:-/tmp}/benchcmp.log.XXXXXX")
	rc=0
	(cd "$dir" && GOMAXPROCS=1 GOGC=off GOMEMLIMIT=4GiB GODEBUG=asyncpreemptoff=1 \
		valgrind --tool=callgrind --callgrind-out-file="$cg" \
		"$bin" -test.run='^$' -test.bench="$pattern" -test.benchtime="${n}x") >"$log" 2>&1 || rc=$?
	# The benchmark ran when its result line (name, then the count) is there.
	esc=$(printf '%s' "$name" | sed 's/[][\.*^$+?(){}|/]/\\&/g')
	if [[ $rc -eq 0 ]] && grep -Eq "^${esc}[[:space:]]+${n}[[:space:]]" "$log"; then
		allocs=$(grep -E "^${esc}[[:space:]]" "$log" | awk '{for (i = 2; i <= NF; i++) if ($i == "allocs/op") print $(i-1)}')
		printf '%s\t%s\t%s\n' "$n" "$(awk '/^summary:/ {print $2}' "$cg")" "${allocs:--}" >"$out"
	else
		printf '%s\t-\n' "$n" >"$out"
		cp "$log" "$out.log"
	fi
	rm -f "$cg" "$log"
	exit 0
fi

jobs=2
list=""
keep=""
while getopts "j:l:o:h" opt; do
	case $opt in
	j) jobs=$OPTARG ;;
	l) list=$OPTARG ;;
	o) keep=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [[ $# -ne 2 ]]; then
	echo "usage: $0 [-j JOBS] [-l LIST] [-o DIR] BASE HEAD" >&2
	exit 2
fi
command -v valgrind >/dev/null || { echo "benchcmp: valgrind is not installed" >&2; exit 1; }

root=$(git rev-parse --show-toplevel)
list=${list:-$root/scripts/benchcmp.list}
[[ -r $list ]] || { echo "benchcmp: cannot read $list" >&2; exit 1; }
base=$(git rev-parse --verify "$1^{commit}")
head=$(git rev-parse --verify "$2^{commit}")
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

work=$(mktemp -d "${TMPDIR:-/tmp}/benchcmp.XXXXXX")
cleanup() {
	git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true
	git -C "$root" worktree remove --force "$work/head" 2>/dev/null || true
	if [[ -z $keep ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
if [[ -z ${GPUTOPO_SHARED:-} && -d $root/../shared/data ]]; then
	GPUTOPO_SHARED=$(cd "$root/../shared" && pwd)
	export GPUTOPO_SHARED
fi

git -C "$root" worktree add -q --detach "$work/base" "$base"
git -C "$root" worktree add -q --detach "$work/head" "$head"

# The list without comments: package, benchmark, N1, N2, base package.
grep -v '^[[:space:]]*\(#\|$\)' "$list" | awk '{print $1, $2, $3, $4, ($5 == "" ? $1 : $5)}' >"$work/list"

# Build each side's test binaries.
for side in base head; do
	mkdir -p "$work/bin/$side"
	if [[ $side == base ]]; then col=5; else col=1; fi
	for pkg in $(awk -v c=$col '{print $c}' "$work/list" | sort -u); do
		bin="$work/bin/$side/$(echo "$pkg" | tr / _).test"
		if [[ -d $work/$side/$pkg ]]; then
			(cd "$work/$side" && go test -c -o "$bin" "./$pkg") >&2 || echo "benchcmp: $side: cannot build ./$pkg" >&2
		fi
	done
done

# One task per side, benchmark and iteration count.
mkdir -p "$work/res"
i=0
: >"$work/tasks"
while read -r pkg name n1 n2 bpkg; do
	i=$((i + 1))
	for side in base head; do
		if [[ $side == base ]]; then p=$bpkg; else p=$pkg; fi
		bin="$work/bin/$side/$(echo "$p" | tr / _).test"
		[[ -x $bin ]] || continue
		for n in "$n1" "$n2"; do
			printf '%s\0%s\0%s\0%s\0%s\0' "$bin" "$work/$side/$p" "$name" "$n" "$work/res/$i.$side.$n" >>"$work/tasks"
		done
	done
done <"$work/list"
total=$(($(tr -cd '\0' <"$work/tasks" | wc -c) / 5))
echo "benchcmp: $total callgrind runs, $jobs at a time" >&2
xargs -0 -n 5 -P "$jobs" "$self" --one <"$work/tasks"

# The table.
commas() { # 1234567 -> 1,234,567
	echo "$1" | sed -e ':a' -e 's/\([0-9]\)\([0-9]\{3\}\)\($\|,\)/\1,\2\3/' -e 'ta'
}
per_op() { # file1 file2 n1 n2
	local a b
	a=$(cut -f2 "$1" 2>/dev/null || echo -)
	b=$(cut -f2 "$2" 2>/dev/null || echo -)
	if [[ $a == - || $b == - || -z $a || -z $b ]]; then echo -; return; fi
	echo $(((b - a) / ($4 - $3)))
}
{
	echo "| benchmark | before | after | change | allocs/op before, after |"
	echo "|---|---:|---:|---:|---:|"
	i=0
	while read -r pkg name n1 n2 bpkg; do
		i=$((i + 1))
		before=$(per_op "$work/res/$i.base.$n1" "$work/res/$i.base.$n2" "$n1" "$n2")
		after=$(per_op "$work/res/$i.head.$n1" "$work/res/$i.head.$n2" "$n1" "$n2")
		label="$pkg ${name#Benchmark}"
		[[ $bpkg != "$pkg" ]] && label+=" (before: $bpkg)"
		printf '%s\t%s\t%s\t%s\n' "$pkg" "$name" "$before" "$after" >>"$work/results.tsv"
		if [[ $before == - || $after == - || $before -le 0 ]]; then
			change=-
		else
			change=$(awk -v a="$before" -v b="$after" 'BEGIN {
				c = (b - a) * 100 / a
				s = sprintf("%+.1f%%", c); if (c > 5) s = s " **slower**"; print s }')
		fi
		ab=$(cut -f3 "$work/res/$i.base.$n2" 2>/dev/null || echo -)
		ah=$(cut -f3 "$work/res/$i.head.$n2" 2>/dev/null || echo -)
		printf '| %s | %s | %s | %s | %s, %s |\n' "$label" "$(commas "$before")" "$(commas "$after")" "$change" "${ab:--}" "${ah:--}"
	done <"$work/list"
} | tee "$work/table.md"
if [[ -n $keep ]]; then
	mkdir -p "$keep"
	cp -r "$work/res" "$work/results.tsv" "$work/table.md" "$keep/"
fi
