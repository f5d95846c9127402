# Shared by bench/profile.sh and bench/consume-cpu.sh (sourced, not run): starting fresh
# `shale serve` processes on loopback and reading their CPU time.

# free_ports N prints N free loopback TCP ports.
free_ports() {
	python3 -c 'import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
[s.bind(("127.0.0.1", 0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])' "$1"
}

# wait_ready HTTP PID LOG: waits up to 30 s for the node serving HTTP to answer /readyz;
# fails, with the tail of LOG, if process PID exits first or time runs out.
wait_ready() {
	local http=$1 pid=$2 log=$3
	for _ in $(seq 300); do
		curl -sf "http://$http/readyz" >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || { tail "$log" >&2; return 1; }
		sleep 0.1
	done
	echo "the node at $http did not become ready" >&2
	tail "$log" >&2
	return 1
}

# schedstat PID prints the process's CPU time and run-queue wait so far, in ms, summed
# over its threads (/proc/PID/task/*/schedstat: ns on a CPU, ns waiting for one). On a
# shared machine the wait says how much of a latency tail is other processes holding
# the cores.
schedstat() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{r+=$1; w+=$2} END {printf "%d %d\n", r/1e6, w/1e6}'
}
