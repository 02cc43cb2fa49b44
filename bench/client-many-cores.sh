#!/usr/bin/env bash
# ordo bench as a load generator on many cores (issue 24 item 6): `ordo bench` beside wrk (HTTP/1.1
# keep-alive) and `ordo bench --h2` beside h2load (HTTP/2 over TLS 1.3), at T client threads each, against
# the same nginx (one worker per server CPU) serving a 2 KB file, in the same run. nginx gets SERVER_CPUS,
# the clients CLIENT_CPUS (disjoint); T is taken from CLIENT_THREADS, skipping any T larger than the client's
# CPU count. Each pairing runs ROUNDS times, alternating the tools (ABBA); printed per T: each client's
# req/s and its own CPU time per request (user + system of the client process), and the paired ratios with
# their 95% CI: req/s (ordo / peer, goal >= 1.0) and CPU efficiency (peer CPU per request / ordo's, goal
# >= 1.0, i.e. ordo no more CPU per request than the peer).
#
#   bench/client-many-cores.sh                          # T in 1 4 8 (those that fit)
#   CLIENT_THREADS="1 2" ROUNDS=3 DURATION=3 bench/client-many-cores.sh
#   SERVER_CPUS=0-7 CLIENT_CPUS=8-15 bench/client-many-cores.sh   # the 16-core layout (the default there)
#   CASES=h1 ...                                        # leave out HTTP/2
#   ORDO_BENCH_NO_BUILD=1 ...                           # use the release binary already built
#
# Default layout: the first half of the CPUs serve, the second half load (on 2 cores: nginx on CPU 0, the
# clients on CPU 1, so only T = 1 fits). CONNS_PER_THREAD connections per client thread for HTTP/1.1;
# H2_CONNS_PER_THREAD connections x STREAMS streams per client thread for HTTP/2.
set -euo pipefail

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-3}
CLIENT_THREADS=${CLIENT_THREADS:-1 4 8}
CASES=${CASES:-h1 h2}
CONNS_PER_THREAD=${CONNS_PER_THREAD:-32}
H2_CONNS_PER_THREAD=${H2_CONNS_PER_THREAD:-4}
STREAMS=${STREAMS:-100}
PORT=${PORT:-18470}
H2_PORT=${H2_PORT:-18471}

. "$(dirname "$0")/lib.sh"
bench_init client-many-cores nginx wrk taskset curl openssl jq
bench_build --bin ordo
bench_ports_free "$PORT" "$H2_PORT"
have_h2load=0
command -v h2load >/dev/null 2>&1 && have_h2load=1
[[ " $CASES " == *" h2 "* ]] && [ "$have_h2load" = 0 ] && echo "client-many-cores: h2load not found: the h2 case is left out" >&2

cpus=$(nproc)
half=$((cpus / 2))
SERVER_CPUS=${SERVER_CPUS:-0-$((half - 1))}
CLIENT_CPUS=${CLIENT_CPUS:-$half-$((cpus - 1))}
count_cpus() { local a=${1%-*} b=${1#*-}; echo $((b - a + 1)); }
server_n=$(count_cpus "$SERVER_CPUS")
client_n=$(count_cpus "$CLIENT_CPUS")

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
bench_tls_cert
NGINX_WORKERS=$server_n bench_nginx_conf "$tmp/nginx" "  server { listen 127.0.0.1:$PORT; root $tmp/www; }
  server {
    listen 127.0.0.1:$H2_PORT ssl http2;
    http2_max_requests 100000000;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    root $tmp/www;
  }"
bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$PORT/file.txt" "$SERVER_CPUS"
url="http://127.0.0.1:$PORT/file.txt"
h2url="https://localhost:$H2_PORT/file.txt"

# One client run, pinned; its CPU time (user + system of it and its threads) from the subshell's `times`
# (getrusage of the waited-for children). Prints "req/s CPU-us/req".
client_run() { # tool args...
  local tool=$1 secs rps reqs
  shift
  secs=$(
    if [ "$tool" = ordo ]; then
      taskset -c "$CLIENT_CPUS" "$ordo" bench --no-progress --save "$tmp/ordo.json" "$@" > "$tmp/client.out" 2>&1 || true
    else
      taskset -c "$CLIENT_CPUS" "$tool" "$@" > "$tmp/client.out" 2>&1 || true
    fi
    # the children's line: "XmY.YYYs XmY.YYYs" (user, system); not in a pipeline, whose fork would not see them
    times > "$tmp/times"
    tail -n 1 "$tmp/times" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2] } print n }'
  )
  case $tool in
    wrk)
      reqs=$(awk '/requests in/ { print $1 }' "$tmp/client.out")
      rps=$(awk '/Requests\/sec/ { print $2 }' "$tmp/client.out")
      grep -qE 'Non-2xx|Socket errors' "$tmp/client.out" && echo "warning: wrk: $(grep -E 'Non-2xx|Socket errors' "$tmp/client.out" | tr -s ' ')" >&2
      ;;
    h2load)
      reqs=$(awk '/^status codes:/ { print $3 }' "$tmp/client.out")
      rps=$(awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") print $i }' "$tmp/client.out")
      grep -q ' 0 failed, 0 errored, 0 timeout' "$tmp/client.out" || echo "warning: h2load: $(grep '^requests:' "$tmp/client.out")" >&2
      ;;
    ordo)
      if [ -s "$tmp/ordo.json" ]; then
        reqs=$(jq -r '.summary.complete' "$tmp/ordo.json")
        rps=$(jq -r '.summary.rps' "$tmp/ordo.json")
        [ "$(jq -r '.summary.failed.total + .summary.non_2xx' "$tmp/ordo.json")" = 0 ] ||
          echo "warning: ordo bench: $(jq -c '{failed: .summary.failed, non_2xx: .summary.non_2xx}' "$tmp/ordo.json")" >&2
        rm -f "$tmp/ordo.json"
      else
        echo "warning: ordo bench wrote no report: $(tail -n 2 "$tmp/client.out")" >&2
      fi
      ;;
  esac
  awk -v r="${rps:-0}" -v n="${reqs:-0}" -v s="${secs:-0}" 'BEGIN { printf "%.0f %.2f\n", r, (n > 0 ? s * 1e6 / n : 0) }'
}

declare -A results
run_case() {
  local r c conns=$((CONNS_PER_THREAD * T)) h2c=$((H2_CONNS_PER_THREAD * T))
  case $1 in
    wrk) read -r r c < <(client_run wrk -t"$T" -c"$conns" -d"${DURATION}s" "$url") ;;
    ordo_h1) read -r r c < <(client_run ordo -t "$T" -c "$conns" -d "${DURATION}s" "$url") ;;
    h2load) read -r r c < <(client_run h2load -t"$T" -c"$h2c" -m"$STREAMS" -D"$DURATION" -H 'accept: */*' "$h2url") ;;
    ordo_h2) read -r r c < <(client_run ordo --h2 --cacert "$tmp/ca.pem" -t "$T" -c "$h2c" --streams "$STREAMS" -d "${DURATION}s" "$h2url") ;;
  esac
  rps[$1]="${rps[$1]:-} $r"; cpu[$1]="${cpu[$1]:-} $c"
}

for T in $CLIENT_THREADS; do
  if [ "$T" -gt "$client_n" ]; then
    echo "T = $T: more client threads than the client's $client_n CPUs ($CLIENT_CPUS); skipped" >&2
    continue
  fi
  cases=()
  [[ " $CASES " == *" h1 "* ]] && cases+=(wrk ordo_h1)
  [[ " $CASES " == *" h2 "* ]] && [ "$have_h2load" = 1 ] && cases+=(h2load ordo_h2)
  for k in "${cases[@]}"; do unset "rps[$k]" "cpu[$k]"; done
  echo "== T = $T: nginx ($server_n workers) on CPUs $SERVER_CPUS; clients on $CLIENT_CPUS" >&2
  bench_rounds "${cases[@]}"
  echo
  echo "T = $T client threads (nginx $server_n workers on CPUs $SERVER_CPUS; clients on CPUs $CLIENT_CPUS; HTTP/1.1 $((CONNS_PER_THREAD * T)) connections; HTTP/2 $((H2_CONNS_PER_THREAD * T)) connections x $STREAMS streams; $ROUNDS rounds x ${DURATION}s)"
  printf '%-9s %12s %18s   %s\n' client "req/s (med)" "client CPU us/req" "all rounds (req/s)"
  for k in "${cases[@]}"; do
    printf '%-9s %12s %18s   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" "${rps[$k]# }"
  done
  if [ -n "${rps[ordo_h1]:-}" ]; then echo "ratio ordo bench / wrk:"; bench_paired_cases ordo_h1 wrk; fi
  if [ -n "${rps[ordo_h2]:-}" ]; then echo "ratio ordo bench --h2 / h2load:"; bench_paired_cases ordo_h2 h2load; fi
done
echo "(goal per issue 24: >= 1.0x the peer's req/s at <= 1.0x its CPU per request, i.e. both ratios >= 1.0, at every T)"
