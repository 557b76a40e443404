#!/usr/bin/env bash
# bench/echo.sh: the out-of-process, pinned echo benchmark (the method of
# docs/BENCHMARKS.md). Run from the repository root:
#
#   bash bench/echo.sh
#   ENGINES="epoll uring uring-hybrid" REPEATS=5 bash bench/echo.sh
#
# It builds cmd/ringecho and cmd/ringload into a temporary directory, then
# for each round (REPEATS of them) and each server in the list runs one
# measurement: start the server pinned to SERVER_CPUS, wait until its port
# accepts, run ringload pinned to CLIENT_CPUS with -server-pid (1 KiB strict
# ping-pong, every echo verified; server CPU from schedstat, syscalls from
# perf stat, context switches from /proc), then SIGTERM the server and wait
# for it. Servers are interleaved within each round so drift hits all alike.
# Each run gets a fresh port. It prints one line per run and, at the end, a
# markdown table of medians with ratios against std. The "other CPU" column
# is CPU that neither ringload nor the server used during the window: near 0
# on an otherwise idle machine; when it is not, other work shared the CPUs
# and the run is noisy.
#
# Servers: "std" (ringload -serve-std: std net, goroutine per connection),
# "ringecho -engine E -api $API" for each E in $ENGINES, and with C_URING=1
# "c-liburing" (bench/c/uring_echo.c, the reference C liburing server of
# BASELINE.md; needs gcc and liburing-dev).
#
# Environment (defaults):
#   ENGINES=epoll        ringecho engines to run besides std; an entry
#                        ENGINE/API overrides API for it
#   STD=1                include the std net server (0: leave it out)
#   C_URING=0            1: include the C liburing reference server
#   API=handler          ringecho -api (handler, inline or conn)
#   LOOPS=               ringecho -loops (empty: the library default)
#   REPEATS=3            rounds
#   CONNS=100  SIZE=1024 connections and message size
#   PROTO=echo           echo, or rpc (length-prefixed requests, each
#                        answered from a buffer of the server's own; see
#                        internal/rpcframe; SIZE is the payload)
#   DEPTH=1              messages in flight per connection (ringload
#                        -depth; 1 is strict ping-pong)
#   RATE=0               offered load in requests/s over all connections
#                        (ringload -rate; 0: as fast as replies come)
#   WARMUP=2  DURATION=10   seconds (decimals allowed)
#   SERVER_CPUS=0  CLIENT_CPUS=1   taskset -c lists
#   BASE_PORT=17100      ports used are BASE_PORT+1, +2, ... on 127.0.0.1
#   KEEP=0               1: keep the temporary directory (binaries, logs,
#                        JSON per run)
#   BASE_REV=            a git revision: ringecho is built at it too, and
#                        each ENGINES entry also runs as base:ENTRY, in the
#                        same rounds, so a change is measured side by side
#                        with the code before it
#
# Bounded: every run takes WARMUP + DURATION plus about a second; ringload
# is also wrapped in timeout(1), and a server that ignores SIGTERM for 10 s
# gets SIGKILL. Only processes this script started are signalled, by PID.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

ENGINES="${ENGINES:-epoll}"
STD="${STD:-1}"
C_URING="${C_URING:-0}"
API="${API:-handler}"
LOOPS="${LOOPS:-}"
REPEATS="${REPEATS:-3}"
CONNS="${CONNS:-100}"
SIZE="${SIZE:-1024}"
PROTO="${PROTO:-echo}"
DEPTH="${DEPTH:-1}"
RATE="${RATE:-0}"
WARMUP="${WARMUP:-2}"
DURATION="${DURATION:-10}"
SERVER_CPUS="${SERVER_CPUS:-0}"
CLIENT_CPUS="${CLIENT_CPUS:-1}"
BASE_PORT="${BASE_PORT:-17100}"
KEEP="${KEEP:-0}"
BASE_REV="${BASE_REV:-}"

die() {
	echo "echo.sh: $*" >&2
	exit 1
}

is_num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
is_int() { [[ $1 =~ ^[0-9]+$ ]]; }
is_num "$WARMUP" || die "WARMUP=$WARMUP: want seconds, e.g. 2 or 0.5"
is_num "$DURATION" || die "DURATION=$DURATION: want seconds, e.g. 10"
is_num "$RATE" || die "RATE=$RATE: want requests per second, e.g. 20000 (0: unpaced)"
for v in REPEATS CONNS SIZE DEPTH BASE_PORT; do
	is_int "${!v}" || die "$v=${!v}: want a whole number"
done
((REPEATS >= 1)) || die "REPEATS=$REPEATS: want at least 1"
[[ $API == handler || $API == inline || $API == conn ]] || die "API=$API: want handler, inline or conn"
[[ $PROTO == echo || $PROTO == rpc ]] || die "PROTO=$PROTO: want echo or rpc"
[[ $PROTO == echo || $C_URING == 0 ]] || die "PROTO=rpc: the C liburing server only echoes; leave C_URING=0"
for tool in go taskset timeout awk sort; do
	command -v "$tool" >/dev/null || die "$tool not found"
done
taskset -c "$SERVER_CPUS" true 2>/dev/null || die "SERVER_CPUS=$SERVER_CPUS: not a usable CPU list"
taskset -c "$CLIENT_CPUS" true 2>/dev/null || die "CLIENT_CPUS=$CLIENT_CPUS: not a usable CPU list"

SERVERS=()
[[ $STD == 1 ]] && SERVERS+=(std)
for e in $ENGINES; do
	SERVERS+=("$e")
	[[ -n $BASE_REV ]] && SERVERS+=("base:$e")
done
[[ $C_URING == 1 ]] && SERVERS+=(c-liburing)
((${#SERVERS[@]} > 0)) || die "no servers to run"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/ringpoll-echo.XXXXXX")"
SERVER_PID=""

cleanup() {
	if [[ -n $SERVER_PID ]]; then
		stop_server || true
	fi
	if [[ $KEEP == 1 ]]; then
		echo "kept $WORK"
	else
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- build ---------------------------------------------------------------

echo "building ringecho and ringload into $WORK"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
go build -o "$WORK/ringload" ./cmd/ringload || die "building cmd/ringload failed"
go build -o "$WORK/ringecho" ./cmd/ringecho ||
	die "building cmd/ringecho failed (it needs the root package; if someone is mid-edit, retry in a minute)"
if [[ -n $BASE_REV ]]; then
	git rev-parse --verify --quiet "$BASE_REV^{commit}" >/dev/null || die "BASE_REV=$BASE_REV: not a commit"
	mkdir -p "$WORK/base"
	git archive "$BASE_REV" | tar -x -C "$WORK/base"
	(cd "$WORK/base" && go build -o "$WORK/ringecho-base" ./cmd/ringecho) ||
		die "building cmd/ringecho at $BASE_REV failed"
	echo "base:      ringecho at $(git rev-parse --short "$BASE_REV") runs as base:ENTRY"
fi
if [[ $C_URING == 1 ]]; then
	cc -O2 -Wall -o "$WORK/uring_echo" bench/c/uring_echo.c -luring ||
		die "building bench/c/uring_echo.c failed: it needs gcc and liburing-dev (apt-get install liburing-dev)"
fi

# --- placement -----------------------------------------------------------

nproc_all="$(nproc --all 2>/dev/null || echo '?')"
cpu_model="$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)"
echo "machine:   ${nproc_all} CPUs (${cpu_model:-unknown}), $(uname -sr), $(go env GOVERSION)"
echo "placement: server on CPUs ${SERVER_CPUS} (taskset -c ${SERVER_CPUS}); ringload and perf on CPUs ${CLIENT_CPUS} (taskset -c ${CLIENT_CPUS}); GOMAXPROCS follows each mask"
cpu_mask() { taskset -c "$1" sh -c 'taskset -p $$' 2>/dev/null | awk '{print $NF}'; }
smask="$(cpu_mask "$SERVER_CPUS")"
cmask="$(cpu_mask "$CLIENT_CPUS")"
if [[ $smask =~ ^[0-9a-f]{1,15}$ && $cmask =~ ^[0-9a-f]{1,15}$ ]] && (((16#$smask & 16#$cmask) != 0)); then
	echo "warning:   server and client share CPUs; results are not comparable to BASELINE.md"
fi
echo "load:      ${CONNS} conns, ${PROTO} ${SIZE} B, ${DEPTH} in flight per connection, warm-up ${WARMUP}s, measured ${DURATION}s, ${REPEATS} rounds of: ${SERVERS[*]}"
echo "loadavg:   $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine skews results)"
if ! command -v perf >/dev/null; then
	echo "warning:   perf not found; syscalls per request will be n/a"
fi
echo

echo "per run: client = ringload's CPU; other = CPU used by neither ringload nor the server"
echo "(the rest of the machine, perf, unattributed softirq: near 0 when the machine is otherwise idle);"
echo "errors = dial/io; rc = ringload/server exit status"
echo

# --- one run -------------------------------------------------------------

port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

NEXT_PORT=$BASE_PORT
next_port() {
	local tries=0
	while :; do
		NEXT_PORT=$((NEXT_PORT + 1))
		((NEXT_PORT <= 65535)) || die "ran out of ports above BASE_PORT=$BASE_PORT"
		port_open "$NEXT_PORT" || return 0
		tries=$((tries + 1))
		((tries < 100)) || die "100 ports in a row above $BASE_PORT are taken"
	done
}

server_label() {
	case $1 in
	std | c-liburing | */*) echo "$1" ;;
	*) echo "$1/$API" ;;
	esac
}

# ringecho_bin NAME: the ringecho binary of an ENGINES entry: base: ones
# run the build of BASE_REV.
ringecho_bin() {
	if [[ $1 == base:* ]]; then
		echo "$WORK/ringecho-base"
	else
		echo "$WORK/ringecho"
	fi
}

# start_server NAME PORT LOG: starts the server pinned, sets SERVER_PID.
start_server() {
	local name=$1 port=$2 log=$3
	local cmd
	if [[ $name == std ]]; then
		cmd=("$WORK/ringload" -serve-std -addr "127.0.0.1:$port" -proto "$PROTO")
	elif [[ $name == c-liburing ]]; then
		cmd=("$WORK/uring_echo" "$port")
	else
		# ENGINE, or ENGINE/API (see ENGINES).
		local engine api bin
		bin="$(ringecho_bin "$name")"
		[[ $name == base:* ]] && name=${name#base:}
		IFS=/ read -r engine api <<<"$name"
		cmd=("$bin" -addr "127.0.0.1:$port" -engine "$engine" -api "${api:-$API}" -proto "$PROTO")
		[[ -n $LOOPS ]] && cmd+=(-loops "$LOOPS")
	fi
	# taskset execs the server, so $! is the server's PID.
	taskset -c "$SERVER_CPUS" "${cmd[@]}" >"$log" 2>&1 </dev/null &
	SERVER_PID=$!
}

# alive PID: the process exists and has not exited (a zombie has).
alive() {
	local state
	state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
	[[ -n $state && $state != Z ]]
}

# wait_port PORT: until the server accepts, at most 10 s; fails if it died.
wait_port() {
	local i
	for ((i = 0; i < 100; i++)); do
		alive "$SERVER_PID" || return 1
		port_open "$1" && return 0
		sleep 0.1
	done
	return 1
}

# stop_server: SIGTERM, up to 10 s to exit, then SIGKILL; reaps it and sets
# SERVER_RC to its exit status. (Not in $(...): only this shell can reap.)
SERVER_RC=""
stop_server() {
	local pid=$SERVER_PID i rc=0
	SERVER_RC=""
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		echo "echo.sh: server $pid ignored SIGTERM for 10 s; SIGKILL" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	SERVER_PID=""
	SERVER_RC=$rc
}

# jnum KEY FILE: a number from ringload's flat JSON object.
jnum() {
	sed -n "s/.*\"$1\":\(-\{0,1\}[0-9.eE+-]*\).*/\1/p" "$2" | head -n1
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
FAILED=0
timeout_s="$(awk -v w="$WARMUP" -v d="$DURATION" 'BEGIN {printf "%d", w + d + 60}')"

run_one() {
	local round=$1 name=$2
	local label port tag json errf slog rc=0 src
	label="$(server_label "$name")"
	next_port
	port=$NEXT_PORT
	tag="r${round}-${name//[\/:]/_}" # ENGINE/API/BATCH names hold slashes
	json="$WORK/$tag.json"
	errf="$WORK/$tag.err"
	slog="$WORK/$tag.server.log"

	start_server "$name" "$port" "$slog"
	if ! wait_port "$port"; then
		stop_server
		printf 'round %d/%d  %-14s FAILED: server did not accept on 127.0.0.1:%d (exit %s); its log:\n' \
			"$round" "$REPEATS" "$label" "$port" "$SERVER_RC"
		sed 's/^/    /' "$slog" | tail -n 20
		FAILED=$((FAILED + 1))
		return 0
	fi
	local comm
	comm="$(cat "/proc/$SERVER_PID/comm" 2>/dev/null || true)"
	[[ $comm == ringload || $comm == ringecho || $comm == ringecho-base || $comm == uring_echo ]] ||
		echo "echo.sh: warning: PID $SERVER_PID is '$comm', not the server" >&2

	taskset -c "$CLIENT_CPUS" timeout --kill-after=5 "$timeout_s" \
		"$WORK/ringload" -addr "127.0.0.1:$port" -conns "$CONNS" -size "$SIZE" -proto "$PROTO" -depth "$DEPTH" \
		-rate "$RATE" -warmup "${WARMUP}s" -duration "${DURATION}s" -server-pid "$SERVER_PID" -json \
		>"$json" 2>"$errf" </dev/null || rc=$?
	stop_server
	src=$SERVER_RC

	if [[ ! -s $json ]]; then
		printf 'round %d/%d  %-14s FAILED: ringload exit %d: %s\n' "$round" "$REPEATS" "$label" "$rc" \
			"$(tail -n 3 "$errf" | tr '\n' ' ')"
		FAILED=$((FAILED + 1))
		return 0
	fi
	local reqs p50 p99 p9999 cores cpuus rpc sys cs verify dialerr ioerr
	reqs="$(jnum req_per_s "$json")"
	p50="$(jnum p50_us "$json")"
	p99="$(jnum p99_us "$json")"
	p9999="$(jnum p9999_us "$json")"
	cores="$(jnum server_cpu_cores "$json")"
	cpuus="$(jnum server_cpu_us_per_req "$json")"
	rpc="$(jnum req_per_server_cpu_s "$json")"
	sys="$(jnum syscalls_per_req "$json")"
	cs="$(jnum ctx_switches_per_req "$json")"
	verify="$(jnum verify_errors "$json")"
	dialerr="$(jnum dial_errors "$json")"
	ioerr="$(jnum io_errors "$json")"
	local ok=1 client other
	[[ $rc == 0 ]] || ok=0
	# client: ringload's own CPU; other: CPU neither it nor the server used
	# (other users of the machine, perf, unattributed softirq).
	client="$(jnum client_cpu_cores "$json")"
	other="$(jnum other_cpu_cores "$json")"
	printf 'round %d/%d  %-14s port %d  %6.0f req/s  p50 %4.0f p99 %5.0f p99.99 %5.0f us  server %.3f cores  %6.3f us/req  %6.0f req/CPU-s  %5.3f syscalls/req  %.3f cs/req  client %.2f other %.2f cores  verify %s  errors %s/%s  rc %d/%s\n' \
		"$round" "$REPEATS" "$label" "$port" "$reqs" "$p50" "$p99" "$p9999" "$cores" "$cpuus" "$rpc" "$sys" "$cs" \
		"$client" "$other" "$verify" "$dialerr" "$ioerr" "$rc" "$src"
	if [[ $sys == -1 ]]; then
		echo "    syscalls not measured: $(sed -n 's/.*"syscalls_note":"\([^"]*\)".*/\1/p' "$json")"
	fi
	if ((rc != 0)); then
		sed 's/^/    /' "$errf" | tail -n 3
		FAILED=$((FAILED + 1))
	fi
	printf '%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
		"$label" "$ok" "$reqs" "$p50" "$p99" "$cores" "$cpuus" "$rpc" "$sys" "$cs" "$verify" "$dialerr" "$ioerr" "$other" "$p9999" \
		>>"$RESULTS"
}

started=$SECONDS
for ((round = 1; round <= REPEATS; round++)); do
	for name in "${SERVERS[@]}"; do
		run_one "$round" "$name"
	done
done

# --- summary -------------------------------------------------------------

echo
rate="as fast as replies come"
[[ $RATE == 0 ]] || rate="offered ${RATE} req/s"
echo "Medians over ${REPEATS} rounds ($((SECONDS - started)) s): ${CONNS} conns, ${SIZE} B, ${rate}, warm-up ${WARMUP}s, ${DURATION}s measured; server on CPUs ${SERVER_CPUS}, client on CPUs ${CLIENT_CPUS}"
echo
labels=()
for name in "${SERVERS[@]}"; do
	labels+=("$(server_label "$name")")
done
awk -F'\t' -v order="${labels[*]}" '
function median(key, col,    n, i, j, t, v) {
	n = 0
	for (i = 1; i <= cnt[key]; i++) {
		v = val[key, i, col]
		if (v == "" || (v < 0 && col != 14)) continue # not measured
		a[++n] = v + 0
	}
	if (n == 0) return -1
	for (i = 2; i <= n; i++) { # insertion sort; n is small
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
		a[j + 1] = t
	}
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function fmt(v, f) { return v < 0 ? "n/a" : sprintf(f, v) }
function ratio(v, base) { return (v < 0 || base <= 0) ? "n/a" : sprintf("%.2f", v / base) }
{
	key = $1; runs[key]++
	if ($2 == 1) { i = ++cnt[key]; for (c = 3; c <= NF; c++) val[key, i, c] = $c }
	verify[key] += $11; conn_err[key] += $12 + $13
}
END {
	print "| server | ok runs | req/s | p50 / p99 / p99.99 µs | server CPU (cores) | server CPU µs/request | requests per server CPU-second | syscalls/request | ctx switches/request | CPU/request vs std | syscalls/request vs std | verify errors | conn errors | other CPU (cores) |"
	print "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
	base_cpu = ("std" in runs) ? median("std", 7) : -1
	base_sys = ("std" in runs) ? median("std", 9) : -1
	n = split(order, keys, " ")
	for (k = 1; k <= n; k++) {
		key = keys[k]
		if (!(key in runs)) { printf "| %s | 0/0 | | | | | | | | | | | | |\n", key; continue }
		rps = median(key, 3); p50 = median(key, 4); p99 = median(key, 5); p9999 = median(key, 15)
		cores = median(key, 6); cpu = median(key, 7); rpc = median(key, 8)
		sys = median(key, 9); cs = median(key, 10); other = median(key, 14)
		printf "| %s | %d/%d | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %.2f |\n", \
			key, cnt[key], runs[key], fmt(rps / 1000, "%.1fk"), fmt(p50, "%.0f"), fmt(p99, "%.0f"), fmt(p9999, "%.0f"), \
			fmt(cores, "%.2f"), fmt(cpu, "%.2f"), fmt(rpc / 1000, "%.0fk"), fmt(sys, "%.2f"), fmt(cs, "%.3f"), \
			ratio(cpu, base_cpu), ratio(sys, base_sys), verify[key], conn_err[key], other
	}
}' "$RESULTS"

if ((FAILED > 0)); then
	echo
	echo "echo.sh: $FAILED run(s) failed; they are left out of the medians"
	exit 1
fi
